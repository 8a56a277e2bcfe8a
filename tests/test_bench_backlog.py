"""The bench's backlog measurement (bench/backlog.py) sorts appends by whether a compaction run was
running while they were answered."""

from bench.backlog import split_by_runs


def test_an_append_counts_as_during_a_run_when_their_times_overlap():
    runs = [(10.0, 20.0), (30.0, float("inf"))]  # the second run has not finished
    timed = [
        (1.0, 2.0, 0.1),  # before any run
        (9.5, 10.5, 0.2),  # answered after the first run started
        (12.0, 13.0, 0.3),  # inside it
        (19.5, 20.5, 0.4),  # started before it finished
        (20.0, 21.0, 0.5),  # began as it finished
        (25.0, 26.0, 0.6),  # between the runs
        (40.0, 41.0, 0.7),  # during the unfinished run
    ]
    during, outside = split_by_runs(timed, runs)
    assert during == [0.2, 0.3, 0.4, 0.7]
    assert outside == [0.1, 0.5, 0.6]


def test_with_no_run_every_append_is_outside():
    assert split_by_runs([(1.0, 2.0, 0.1), (3.0, 4.0, 0.2)], []) == ([], [0.1, 0.2])
