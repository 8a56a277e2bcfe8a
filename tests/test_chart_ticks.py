"""The size chart's ticks (sessions/dashboard/chart.py): round values, 1, 2 or 5 times a power of ten, from 0, a
handful of them whatever the range: nothing yet, a few tokens, a million-token session."""

import pytest

from sessions.dashboard.chart import (
    X_TICKS,
    Y_TICKS,
    message_ticks,
    round_step,
    tick_values,
    token_label,
    token_ticks,
)

RANGES = [0, 0.4, 1, 2, 3, 7, 9.9, 10, 11, 24, 99, 101, 950, 1000, 1001, 6600, 6701, 10_082, 15_000,
          99_999, 128_000, 1_234_567, 10**9 + 1]


def is_round(step: int) -> bool:
    digits = str(step).rstrip("0")
    return digits in ("1", "2", "5")


@pytest.mark.parametrize("span", RANGES)
@pytest.mark.parametrize("most", [Y_TICKS, X_TICKS])
def test_the_step_is_the_smallest_round_one_giving_at_most_so_many_steps(span, most):
    step = round_step(span, most)

    assert is_round(step) and step >= 1
    assert span / step <= most
    if step > 1:
        smaller = {"1": step // 2, "2": step // 2, "5": step * 2 // 5}[str(step)[0]]  # 10 -> 5, 20 -> 10, 50 -> 20
        assert span / smaller > most, f"{smaller} would also do for {span}"


@pytest.mark.parametrize("span", RANGES)
def test_ticks_start_at_0_go_up_by_the_step_and_stay_within_the_range(span):
    ticks = tick_values(span, Y_TICKS)

    assert ticks[0] == 0
    assert all(t <= max(span, 0) for t in ticks)
    steps = {b - a for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) <= 1 and all(is_round(s) for s in steps)
    if span >= 1:
        assert 2 <= len(ticks) <= Y_TICKS + 1
        assert ticks[-1] >= span / 2, "the top tick is more than half way up"


def test_typical_token_axes_get_the_ticks_a_person_would_draw():
    assert [t.label for t in token_ticks(6701)] == ["0", "2k", "4k", "6k"]
    assert [t.label for t in token_ticks(16_500)] == ["0", "5k", "10k", "15k"]
    assert [t.label for t in token_ticks(1100)] == ["0", "200", "400", "600", "800", "1k"]
    assert [t.label for t in token_ticks(2.2)] == ["0", "1", "2"]
    assert [t.label for t in token_ticks(3_300_000)] == ["0", "1M", "2M", "3M"]
    assert [t.label for t in token_ticks(2_900_000)] == ["0", "500k", "1M", "1.5M", "2M", "2.5M"]


def test_token_labels_are_short():
    assert [token_label(n) for n in (0, 5, 750, 1000, 1500, 20_000, 250_000, 2_000_000, 2_500_000)] == [
        "0", "5", "750", "1k", "1.5k", "20k", "250k", "2M", "2.5M"]


def test_message_ticks_are_message_numbers_without_the_start():
    assert [t.label for t in message_ticks(5200)] == ["#1000", "#2000", "#3000", "#4000", "#5000"]
    assert [t.label for t in message_ticks(37)] == ["#5", "#10", "#15", "#20", "#25", "#30", "#35"]
    assert [t.value for t in message_ticks(3)] == [1, 2, 3]
    assert [t.value for t in message_ticks(1)] == [1]
    assert [t.value for t in message_ticks(0)] == []
