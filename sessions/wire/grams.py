"""Search grams for the scripts written without spaces between words (Chinese, Japanese, Korean, Thai,
Lao, Khmer, Myanmar): each run of their characters becomes its overlapping pairs of characters, so a
word inside a sentence is found by the phrase of its pairs, through the same full-text index as every
other word (sessions/db/message_search.py). Bigrams, as Lucene's CJK analyzer makes them: unlike
trigrams (FTS5's trigram tokenizer, pg_trgm), they find words of two characters, the commonest length
of a Chinese or Japanese word, through the index rather than by reading every message. A message keeps
its runs' grams in Message.search_grams (empty for text without such a run)."""

import re

# Han (with its extensions and compatibility forms), Hiragana, Katakana (with its phonetic extensions
# and the half-width forms), Hangul (syllables and jamo), Thai, Lao, Myanmar and Khmer.
UNSPACED = re.compile(
    "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff]+"
)

PIECES = re.compile(f"({UNSPACED.pattern})")


def pairs(run: str) -> str:
    """A run's overlapping pairs of characters, space-separated: a phrase of them matches exactly where
    the run occurs; a run of one character is itself."""
    if len(run) < 2:
        return run
    return " ".join(run[i:i + 2] for i in range(len(run) - 1))


def search_grams(text: str) -> str:
    """What Message.search_grams holds for `text`: each stretch between spaces that holds an unspaced
    run, its runs as their pairs and what is glued to them ("はABC123です": "ABC123") on its own, so
    that is a word of the index too; "" when the text has no such run (most text), so nothing more is
    stored or indexed for it."""
    if not UNSPACED.search(text):
        return ""
    out = []
    for stretch in text.split():
        if not UNSPACED.search(stretch):
            continue
        for piece in PIECES.split(stretch):
            if piece:
                out.append(pairs(piece) if UNSPACED.fullmatch(piece) else piece)
    return " ".join(out)


def split_query(query: str) -> tuple[str, list[str]]:
    """A search query as the spaced words left (the unspaced runs blanked out) and its unspaced runs."""
    runs = UNSPACED.findall(query)
    return (UNSPACED.sub(" ", query) if runs else query), runs
