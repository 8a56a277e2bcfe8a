"""The size chart's scales: round tick values (1, 2 or 5 times a power of ten) for token counts and
message numbers, and their short labels. Plain integers in, so the choice can be tested alone."""

from dataclasses import dataclass

Y_TICKS = 6  # at most this many steps above 0 on the token axis
X_TICKS = 10  # and along the message numbers


@dataclass(frozen=True)
class Tick:
    value: int
    label: str


def round_step(span: float, most: int) -> int:
    """The smallest step of 1, 2 or 5 times a power of ten (at least 1) that cuts `span` into at most
    `most` steps."""
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            step = factor * magnitude
            if span / step <= most:
                return step
        magnitude *= 10


def tick_values(span: float, most: int) -> list[int]:
    """0 and each multiple of the round step up to `span`."""
    step = round_step(max(span, 1), most)
    return list(range(0, int(span) + 1, step))


def token_label(tokens: int) -> str:
    """A token count as a tick says it: 750, 1.5k, 20k, 2M."""
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:g}M"
    if tokens >= 1000:
        return f"{tokens / 1000:g}k"
    return str(tokens)


def token_ticks(top: float) -> list[Tick]:
    """Ticks for a token axis from 0 to `top`."""
    return [Tick(v, token_label(v)) for v in tick_values(top, Y_TICKS)]


def message_ticks(last_seq: int) -> list[Tick]:
    """Ticks at message numbers from 1 to `last_seq` (the chart starts at 0, before the first message,
    which gets no label)."""
    return [Tick(v, f"#{v}") for v in tick_values(last_seq, X_TICKS) if v > 0]
