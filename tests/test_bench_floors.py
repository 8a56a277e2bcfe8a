"""The bench's floors measurement (bench/floors.py): what its token-counting floor reads of a message, and
the first/last-10% medians of the application pattern."""

from bench.floors import median_of_slice, texts


def test_the_floor_counts_the_text_the_app_counts():
    assert texts({"role": "user", "content": "hello"}) == ["hello"]
    assert texts({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image", "url": "x"}]}) == ["a", ""]
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "f", "arguments": '{"x": 1}'}]}
    assert texts(message) == ["f", '{"x": 1}']
    assert texts({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "f", "arguments": {"x": 1}}]}) == \
        ["", "f", '{"x": 1}']


def test_first_and_last_tenth():
    samples = list(range(1, 101))
    assert median_of_slice(samples, True) == 5.5
    assert median_of_slice(samples, False) == 95.5
    assert median_of_slice([3.0], True) == median_of_slice([3.0], False) == 3.0
