"""Personal data in a text, found and masked for viewers: e-mail addresses, phone numbers, payment
card numbers, IBANs, secrets (API keys, tokens, passwords), IP addresses, and a project's own patterns.
`find_personal_data` says where they are, `mask` replaces each by its label (`[email]`, `[phone]`,
`[card •••• 7312]`, `[iban]`, `[secret]`, `[ip]`, `[<name>]`), `mask_value` does it to every string of
a JSON value (tool arguments, metadata), `mask_html` to what people read on an HTML page.

What finds them, and why:
- phones: Google's libphonenumber (package `phonenumbers`), leniency VALID: a number must be valid in
  its country's numbering plan, not merely look like one. "+", "00" and "011" numbers of every country;
  a number without a country code is read as a US one and kept only when grouped as North American
  numbers are ((415) 555-2671) or after a word such as "phone" or "call", and after such a word it is
  also tried against the regions of NATIONAL_REGIONS (020 7946 0958). Other national numbers with no
  such word stay: a bare run of digits is more often an id than a phone.
- IBANs: `python-stdnum`, which carries the ISO 13616 registry (each country's length and BBAN
  structure, kept up to date by its maintainers) and the mod-97 check; national check digits are not
  required (check_country=False). Pure Python, no dependencies.
- cards: 13 to 19 digits, grouped by spaces or dashes or not, with a known issuer prefix and length
  (ISSUERS) and a valid Luhn digit (stdnum.luhn).
- e-mail addresses, secrets and IP addresses: regular expressions written here, IPs checked by the
  `ipaddress` module; loopback and unspecified addresses (127.0.0.1, 0.0.0.0, ::1) are not personal
  and stay, and so do addresses written as versions (==1.2.3.4, pkg-1.2.3.4, Chrome/120.0.0.0).
- a project's own patterns: compiled by RE2, linear in the text whatever the pattern.

Presidio (presidio-analyzer 2.2.366) was tried and not used: its AnalyzerEngine does not start offline
(it downloads a spaCy model); its recognizers, called one by one, run without one, but it installs
spaCy, thinc, numpy and about 50 packages (393 MB), its recognizers take 0.85 s to import, and on
tests/pii's corpus they found phones with a precision of 0.85 (and tau-bench's gift_card_1647044 is a
phone to them), IPs with 0.73, cards with a recall of 0.89, and no secrets, in 1.1 s for the 1,000
tau-bench messages this module masks in 0.1 s.

Cost: linear in the text. A detector runs only when the text holds what it needs ("@" for e-mail,
seven close digits for phones, a word such as "token" for assignments: _EIGHT_DIGITS and the others);
the patterns start at word boundaries and repeat bounded parts only; e-mail addresses are read around
each "@"; libphonenumber reads only the runs of digits that could be kept. 1,000 messages of tau-bench
(476 KB) in 0.1 s; 200 KB of numbers in a table, or of hostile text, in under 0.5 s
(tools/masking_report.py, tests/test_masking.py).
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape, unescape
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlencode

import phonenumbers
import re2
from phonenumbers import Leniency, PhoneMetadata, PhoneNumberMatcher
from stdnum import iban as stdnum_iban
from stdnum import luhn

from sessions.errors import DomainError

KINDS = ("email", "phone", "card", "iban", "secret", "ip", "custom")
# Of two overlapping spans the longer is kept; of two as long, the kind first here.
PRIORITY = {"secret": 0, "card": 1, "iban": 2, "email": 3, "custom": 4, "ip": 5, "phone": 6}


@dataclass(frozen=True, slots=True)
class Found:
    start: int
    end: int
    kind: str
    label: str


@dataclass(frozen=True, slots=True)
class CustomPattern:
    """A project's own pattern: masked as `[name]`. `regex` is compiled by RE2 (compile_patterns)."""

    name: str
    regex: Any


# --- e-mail ----------------------------------------------------------------------------------------

# Read backwards from an "@" (at most 64 characters, the RFC 5321 limit) and forwards (at most 255).
_LOCAL = re.compile(r"[\w%+-]+(?:\.[\w%+-]+)*\Z")
_LOCAL_CHAR = re.compile(r"[\w%+.-]")
_DOMAIN = re.compile(
    r"(?:[^\W_][\w-]{0,62}\.)+(?:xn--[a-z0-9-]{1,59}|[^\W\d_]{2,63})(?![\w-]|\.[^\W_])", re.IGNORECASE
)
_RETINA = re.compile(r"\d+x\.", re.IGNORECASE)  # icon@2x.png is a file name
_AT = re.compile(r"@|%40")  # %40 in a URL: ?email=jane.doe%40example.com


def _emails(text: str) -> list[Found]:
    found: list[Found] = []
    at_signs = ((m.start(), m.end()) for m in _AT.finditer(text)) if "%40" in text else _at_signs(text)
    for at, after in at_signs:
        if found and at < found[-1].end:
            continue
        local = _LOCAL.search(text, max(0, at - 64), at)
        if not local:
            continue
        start = local.start()
        if (start > 0 and _LOCAL_CHAR.match(text, start - 1)) or text[start:at] == "git":
            continue  # longer than 64 characters: not an address; git@github.com:org/repo, an SSH remote
        domain = _DOMAIN.match(text, after, after + 255)
        if domain and not _RETINA.match(text, after):
            found.append(Found(start, domain.end(), "email", "[email]"))
    return found


def _at_signs(text: str):
    at = text.find("@")
    while at != -1:
        yield at, at + 1
        at = text.find("@", at + 1)


# --- phones ----------------------------------------------------------------------------------------

DEFAULT_REGION = "US"
# Regions tried for a number without a country code that is not a US one ("020 7946 0958"), only after a
# word saying it is a phone.
NATIONAL_REGIONS = ("GB", "DE", "FR", "IT", "ES", "NL", "BE", "CH", "AT", "IE", "PT", "SE", "PL",
                    "AU", "NZ", "IN", "JP", "KR", "CN", "BR", "ZA", "TR", "IL")
_SEVEN_DIGITS = re.compile(r"\d(?:[ ().\-/]{0,3}\d){6}")
_SEPARATORS = "\t \u00a0\u202f().\\-\u2010-\u2015/"  # no-break spaces and Unicode dashes too
_DATE = re.compile(r"\d{4}([-./])\d\d\1\d\d(?: \d\d)?|\d\d?([-./])\d\d?\2\d{4}")
_NANP_SHAPE = re.compile(r"(?<!\d)(?:1[ .\-])?\(?\d{3}\)?[ .\-]?\d{3}[ .\-]\d{4}(?!\d)")
_PHONE_RUN = re.compile(rf"(?<![\w.])\+?\(?\d(?:[{_SEPARATORS}]{{0,3}}\d){{6,19}}")
# "0044 20 …": the international prefix of most countries, where a number starts.
_IDD_00 = re.compile(r"""(?:^|(?<=[\s"'(=:,;]))00(?=[1-9])""")
_PHONE_WORDS = re.compile(
    r"(?i)\b(?:phone|tel|telephone|mobile|cell|cellphone|call|calling|fax|whatsapp|sms|text\s+me|dial|reach|"
    r"contact|landline|hotline|handy|telefon|téléphone|tél|teléfono|telefono|móvil|cellulare|"
    r"(?:my|our|his|her|their|your)\s+number)\b"
)
_DIGIT_GROUPS = re.compile(r"\d+")
_NATIONAL_CANDIDATE = re.compile(r"(?<![\w+.])\(?\d[\d ()\-.]{5,16}\d(?![\w.]?\d)")


def _could_be_us(digits: str) -> bool:
    """Ten digits not opening with 0 or 1, or eleven opening with 1: the length of a US number."""
    return (len(digits) == 10 and digits[0] not in "01") or (len(digits) == 11 and digits[0] == "1")


def _grouped_as_nanp(raw: str) -> bool:
    """Written as North American numbers are: (415) 555-2671, 415.555.2671, 1-415-555-2671."""
    return tuple(len(group) for group in _DIGIT_GROUPS.findall(raw)) in ((3, 3, 4), (1, 3, 3, 4))


def _has_phone_word(text: str, start: int) -> bool:
    """A word saying a number is a phone within 40 characters before it; not the label "[phone]" of a
    number masked before it (masking a masked text again finds nothing new)."""
    return any(not (word.start() > 0 and text[word.start() - 1] == "[" and text[word.end():word.end() + 1] == "]")
               for word in _PHONE_WORDS.finditer(text, max(0, start - 40), start))


def _phone_windows(text: str) -> list[tuple[int, int]]:
    """The parts of `text` where a phone number can be, with a few characters on either side (a time
    after a date tells libphonenumber it is a timestamp): runs of seven digits or more, with the
    separators phones are written with, that are not a date and that _phones could keep (international,
    grouped as North American numbers are, or a US number after a phone word). libphonenumber reads
    these, not the whole text: it takes 2 s on 200 KB of numbers in a table."""
    windows: list[tuple[int, int]] = []
    for run in _PHONE_RUN.finditer(text):
        value = run.group()
        if _DATE.fullmatch(value) or not (
                value.startswith(("+", "011")) or _NANP_SHAPE.search(value)
                or (_could_be_us("".join(_DIGIT_GROUPS.findall(value))) and _has_phone_word(text, run.start()))):
            continue  # what _phones would not keep: not worth libphonenumber's time (numbers in a table)
        start, end = max(0, run.start() - 8), min(len(text), run.end() + 8)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def _phones(text: str) -> list[Found]:
    scanned = text
    if "00" in text:
        # "0044 20 7946 0958" read as "+44 20 7946 0958"; same length, so the offsets stay.
        scanned = _IDD_00.sub(" +", text)
    found = []
    for window_start, window_end in _phone_windows(scanned):
        window = scanned[window_start:window_end]
        for match in PhoneNumberMatcher(window, DEFAULT_REGION, leniency=Leniency.VALID, max_tries=len(window)):
            start, end, raw = window_start + match.start, window_start + match.end, match.raw_string
            if raw.startswith("+") and start > 0 and scanned[start - 1] == " " and text[start - 1] == "0":
                start -= 1
            elif not raw.startswith(("+", "011")) and not (_grouped_as_nanp(raw) or _has_phone_word(text, start)):
                continue  # 4155552671 or 8472-1193-55 with nothing saying it is a phone: an id, not a number
            found.append(Found(start, end, "phone", "[phone]"))
    found += _international_before_digits(scanned, found)
    return found + _national_phones(text, found)


_GROUP_ENDS = re.compile(r"\d(?=[^\d]|$)")


def _international_before_digits(text: str, found: list[Found]) -> list[Found]:
    """A "+" number followed by more digits ("+44 20 7946 0958 2 times", "+1 415 555 2671 12 tok"), which
    libphonenumber reads as one longer, invalid number: its run cut at each group's end, longest first,
    until one is a valid number; and a North American number opening a longer run of digits."""
    more = []
    for run in _PHONE_RUN.finditer(text):
        if any(f.start < run.end() and run.start() < f.end for f in found):
            continue
        if not run.group().startswith("+"):
            # "(415) 555-2671 4111 1111 1111 1111": a North American number at the start of a longer run.
            nanp = _NANP_SHAPE.match(run.group())
            if nanp and _is_valid_in(DEFAULT_REGION, nanp.group()):
                more.append(Found(run.start(), run.start() + nanp.end(), "phone", "[phone]"))
            continue
        ends = [run.start() + m.end() for m in _GROUP_ENDS.finditer(run.group())][:-1]
        for end in reversed(ends):
            candidate = text[run.start():end]
            if sum(char.isdigit() for char in candidate) < 7:
                break
            try:
                number = phonenumbers.parse(candidate, None)
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_valid_number(number):
                more.append(Found(run.start(), end, "phone", "[phone]"))
                break
    return more


def _national_phones(text: str, found: list[Found]) -> list[Found]:
    """Numbers without a country code after a phone word, valid in the US or one of NATIONAL_REGIONS."""
    more = []
    starts = [f.start for f in found]
    for candidate in _NATIONAL_CANDIDATE.finditer(text):
        start, end = candidate.span()
        before = bisect.bisect_left(starts, end) - 1
        if ((before >= 0 and found[before].end > start) or _DATE.fullmatch(candidate.group())
                or not _has_phone_word(text, start)):
            continue
        digits = "".join(_DIGIT_GROUPS.findall(candidate.group()))
        for region in (DEFAULT_REGION, *NATIONAL_REGIONS):
            if _allowed_in(region, digits) and _is_valid_in(region, candidate.group()):
                more.append(Found(start, end, "phone", "[phone]"))
                break
    return more


@functools.cache
def _numbering_plan(region: str) -> tuple[str, re.Pattern]:
    """A region's trunk prefix, and one pattern of all its kinds of numbers (fixed line, mobile, …)."""
    metadata = PhoneMetadata.metadata_for_region(region)
    kinds = (metadata.fixed_line, metadata.mobile, metadata.toll_free, metadata.premium_rate,
             metadata.shared_cost, metadata.personal_number, metadata.voip, metadata.pager, metadata.uan,
             metadata.voicemail)
    patterns = [kind.national_number_pattern for kind in kinds if kind and kind.national_number_pattern]
    return metadata.national_prefix or "", re.compile("|".join(f"(?:{pattern})" for pattern in patterns))


def _allowed_in(region: str, digits: str) -> bool:
    """Whether the region's numbering plan has these digits (their trunk prefix dropped): one regular
    expression, where libphonenumber's parse and check take fifty times longer; a column of numbers
    after a phone word would otherwise take seconds."""
    prefix, pattern = _numbering_plan(region)
    national = digits[len(prefix) :] if prefix and digits.startswith(prefix) else digits
    return pattern.fullmatch(national) is not None


def _is_valid_in(region: str, number: str) -> bool:
    try:
        return phonenumbers.is_valid_number_for_region(phonenumbers.parse(number, region), region)
    except phonenumbers.NumberParseException:
        return False


# --- cards -----------------------------------------------------------------------------------------

# Runs of digit groups separated by one space or one dash, not part of a decimal, an amount or a word.
_DIGIT_RUN = re.compile(r"(?<![\w.,$€£/:#-])\d{3,19}(?:[ -]\d{1,7}){0,7}(?![\w$€£]|[.,]\d)")
# Issuer prefixes (inclusive ranges of leading digits) and the lengths they issue.
ISSUERS = (
    ((4, 4), (13, 16, 19)),  # Visa
    ((51, 55), (16,)), ((2221, 2720), (16,)),  # Mastercard
    ((34, 34), (15,)), ((37, 37), (15,)),  # American Express
    ((6011, 6011), (16, 17, 18, 19)), ((644, 649), (16, 17, 18, 19)), ((65, 65), (16, 17, 18, 19)),  # Discover
    ((300, 305), (14, 15, 16, 17, 18, 19)), ((36, 36), (14, 15, 16, 17, 18, 19)),  # Diners Club
    ((38, 39), (16, 17, 18, 19)),
    ((3528, 3589), (16, 17, 18, 19)),  # JCB
    ((62, 62), (16, 17, 18, 19)),  # UnionPay
    ((2200, 2204), (16, 17, 18, 19)),  # Mir
    ((5018, 5018), (13, 14, 15, 16, 17, 18, 19)), ((5020, 5020), (13, 14, 15, 16, 17, 18, 19)),  # Maestro
    ((5038, 5038), (13, 14, 15, 16, 17, 18, 19)), ((5893, 5893), (13, 14, 15, 16, 17, 18, 19)),
    ((6304, 6304), (13, 14, 15, 16, 17, 18, 19)), ((6759, 6759), (13, 14, 15, 16, 17, 18, 19)),
    ((6761, 6763), (13, 14, 15, 16, 17, 18, 19)),
)


def is_card_number(digits: str) -> bool:
    if not 13 <= len(digits) <= 19:
        return False
    for (low, high), lengths in ISSUERS:
        prefix = int(digits[: len(str(low))])
        if low <= prefix <= high and len(digits) in lengths:
            return luhn.is_valid(digits)
    return False


def _cards(text: str) -> list[Found]:
    found = []
    for run in _DIGIT_RUN.finditer(text):
        value = run.group()
        if len(value) < 13:
            continue
        separators = {char for char in value if not char.isdigit()}
        if len(separators) > 1:
            continue
        groups = re.split(r"[ -]", value) if separators else [value]
        offsets = [run.start()]
        for group in groups:
            offsets.append(offsets[-1] + len(group) + 1)
        card = _card_in(groups)
        if card:
            first, last = card
            start, end = offsets[first], offsets[last + 1] - 1
            digits = "".join(groups[first : last + 1])
            found.append(Found(start, end, "card", f"[card •••• {digits[-4:]}]"))
    return found


def _card_in(groups: list[str]) -> tuple[int, int] | None:
    """The first and last group of the longest card number among consecutive groups (a grouped card
    opens with a group of four: 4111 1111 1111 1111, 3782 822463 10005)."""
    best = None
    for first in range(len(groups)):
        if len(groups) > 1 and len(groups[first]) != 4:
            continue
        digits = ""
        for last in range(first, len(groups)):
            digits += groups[last]
            if len(digits) > 19:
                break
            if is_card_number(digits) and (best is None or last - first > best[1] - best[0]):
                best = (first, last)
    return best


# --- IBANs -----------------------------------------------------------------------------------------

_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")


def _ibans(text: str) -> list[Found]:
    found = []
    for candidate in _IBAN.finditer(text):
        value = candidate.group()
        # Longest first, cut at the spaces: "DE89 3704 0044 0532 0130 00 AB12" holds a shorter IBAN.
        cuts = [len(value)] + [i for i in range(len(value) - 1, 0, -1) if value[i] == " "]
        for cut in cuts:
            if stdnum_iban.is_valid(value[:cut], check_country=False):
                found.append(Found(candidate.start(), candidate.start() + cut, "iban", "[iban]"))
                break
    return found


# --- secrets ---------------------------------------------------------------------------------------

_TOKENS = re.compile(
    r"""(?<![\w-])(?:
        sk-ant-[A-Za-z0-9_-]{20,}                          # Anthropic
      | sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}    # OpenAI
      | (?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}                # AWS access key id
      | gh[pousr]_[A-Za-z0-9]{36,255}                      # GitHub
      | github_pat_[A-Za-z0-9_]{22,255}
      | xox[baprs]-[A-Za-z0-9-]{10,}                       # Slack
      | (?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}        # Stripe
      | AIza[A-Za-z0-9_-]{35}                              # Google
      | eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*   # JWT
      | -----BEGIN[A-Z ]{0,20}PRIVATE\ KEY-----.*?-----END[A-Z ]{0,20}PRIVATE\ KEY-----
    )(?![\w-])""",
    re.VERBOSE | re.DOTALL,
)
_AUTHORIZATION = re.compile(
    r"""(?i:\bauthorization\b["']?\s*[:=]\s*["']?(?:bearer|basic|token)?\s*|\bbearer\s+)([A-Za-z0-9._~+/-]{8,}=*)"""
)
# A value assigned to a name ending in one of these words: DB_PASSWORD=…, "api_key": "…", x-api-key: …
_ASSIGNMENT = re.compile(
    r"""(?i)(?<![A-Za-z0-9])(?:password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?key|
    private[_-]?key|token)(?![A-Za-z0-9_])["']?[ \t]*(=>|=|:)[ \t]*
    (?:"([^"\n]{1,200})"|'([^'\n]{1,200})'|([^\s"',;)}\]]{1,200}))""",
    re.VERBOSE,
)
_NOT_A_SECRET = re.compile(
    r"""(?ix)^(?:none|null|nil|true|false|undefined|required|optional|string|str|bytes|int|bool|secretstr|
    any|empty|redacted|masked|hidden|n/a|\*+|x+|•+|\.+|-+|<[^>]*>|\[[^\]]*\]|\$\{?\w+\}?|\{\{.*\}\}|%\(?\w+\)?s?|
    (?:your|my)[\w-]*|\w*(?:placeholder|example|here)\w*)$"""
)
_CODE_REFERENCE = re.compile(r"^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Z][A-Z0-9_]*|.*[(\[].*)$")
_PLAIN_WORD = re.compile(r"^[A-Za-z][a-z]*$")


# Strings each pattern needs (in the text lowercased): looked for first, a hundredth of a pattern's time.
_TOKEN_MARKS = ("sk-", "akia", "asia", "abia", "acca", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                "xox", "_live_", "_test_", "aiza", "eyj", "private key")
_AUTHORIZATION_MARKS = ("authorization", "bearer")
_ASSIGNMENT_MARKS = ("pass", "pwd", "secret", "key", "token")


def _secrets(text: str) -> list[Found]:
    found: list[Found] = []
    lower = text.lower()
    if any(mark in lower for mark in _TOKEN_MARKS):
        for match in _TOKENS.finditer(text):
            value = match.group()
            if value.startswith("sk-") and not any(char.isdigit() for char in value):
                continue  # sk-learn-compatible-estimator: a word, not a key
            found.append(Found(match.start(), match.end(), "secret", "[secret]"))
    if any(mark in lower for mark in _AUTHORIZATION_MARKS):
        for match in _AUTHORIZATION.finditer(text):
            found.append(Found(match.start(1), match.end(1), "secret", "[secret]"))
    if not any(mark in lower for mark in _ASSIGNMENT_MARKS):
        return found
    for match in _ASSIGNMENT.finditer(text):
        quoted = match.lastindex in (2, 3)
        value = match.group(match.lastindex)
        if _NOT_A_SECRET.match(value) or (not quoted and _CODE_REFERENCE.match(value)):
            continue
        if not quoted and match.group(1) == ":" and _PLAIN_WORD.match(value):
            continue  # "Password: please reset it": prose, not a password
        found.append(Found(match.start(match.lastindex), match.end(match.lastindex), "secret", "[secret]"))
    return found


# --- IP addresses ----------------------------------------------------------------------------------

_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?!\w|\.\w|-[A-Za-z])")
# A version, not an address: "version 10.0.19041.1", "==1.2.3.4", "Chrome/120.0.0.0".
_VERSION_BEFORE = re.compile(
    r"(?i)(?:\bv(?:er(?:sion)?)?\.?|\brelease|\bbuild|==|>=|<=|~=|!=|\^|~|\b[A-Za-z][\w.-]*/|[A-Za-z]-)[ :=]*\Z"
)
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?!\w|:[\w:])"
)


def _ips(text: str) -> list[Found]:
    found: list[Found] = []
    for match in _IPV4.finditer(text) if _IPV4_START.search(text) else ():
        try:
            address = ipaddress.IPv4Address(match.group())
        except ValueError:
            continue
        if address.is_loopback or address.is_unspecified:
            continue
        if _VERSION_BEFORE.search(text, max(0, match.start() - 24), match.start()):
            continue
        found.append(Found(match.start(), match.end(), "ip", "[ip]"))
    if _IPV6_START.search(text):
        for match in _IPV6.finditer(text):
            value, end = match.group(), match.end()
            if value.endswith(":") and not value.endswith("::"):
                value, end = value[:-1], end - 1  # "from 2a03:2880::304f: icmp_seq=1"
            groups = [group for group in value.split(":") if group]
            if len(groups) < 3 and not any(len(group) == 4 for group in groups):
                continue  # x[1::2], 10::2: slices and such
            try:
                address = ipaddress.IPv6Address(value)
            except ValueError:
                continue
            if address.is_loopback or address.is_unspecified:
                continue
            found.append(Found(match.start(), end, "ip", "[ip]"))
    return found


# --- a project's own patterns ----------------------------------------------------------------------

MAX_PATTERNS = 20
MAX_PATTERN_CHARS = 500
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def compile_patterns(items: list[dict]) -> list[CustomPattern]:
    """A project's own patterns ([{"name": "employee_id", "pattern": "EMP-[0-9]{6}"}, …]), checked and
    compiled by RE2; a bad one raises DomainError (code invalid_masking) saying which and why."""
    if not isinstance(items, list):
        raise _invalid("Masking patterns must be a list of {\"name\", \"pattern\"} objects.")
    if len(items) > MAX_PATTERNS:
        raise _invalid(f"At most {MAX_PATTERNS} masking patterns, not {len(items)}.")
    patterns, names = [], set()
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict) or set(item) != {"name", "pattern"}:
            raise _invalid(f"Masking pattern {number} must be an object with exactly \"name\" and \"pattern\".")
        name, source = item["name"], item["pattern"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise _invalid(f"Masking pattern {number}: the name {name!r} must be a short slug: a lowercase "
                           "letter, then up to 31 lowercase letters, digits, '_' or '-'.")
        if name in names:
            raise _invalid(f"Masking pattern {number}: the name {name!r} is used twice.")
        if not isinstance(source, str) or not source.strip():
            raise _invalid(f"Masking pattern {name!r}: the pattern must be a non-empty string.")
        if len(source) > MAX_PATTERN_CHARS:
            raise _invalid(f"Masking pattern {name!r}: at most {MAX_PATTERN_CHARS} characters, "
                           f"not {len(source)}.")
        options = re2.Options()
        options.log_errors = False
        options.max_mem = 8 << 20
        try:
            regex = re2.compile(source, options)
        except re2.error as error:
            reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
            hint = (" RE2 has no lookaround and no backreferences." if "perl operator" in reason
                    or "escape sequence" in reason else "")
            raise _invalid(f"Masking pattern {name!r} is not a valid RE2 regular expression ({reason}).{hint}"
                           ) from None
        if regex.search("") is not None:
            raise _invalid(f"Masking pattern {name!r} matches the empty text; it must match at least one "
                           "character.")
        names.add(name)
        patterns.append(CustomPattern(name, regex))
    return patterns


def _invalid(detail: str) -> DomainError:
    return DomainError(detail, code="invalid_masking")


def _custom(text: str, patterns: Sequence[CustomPattern]) -> list[Found]:
    found = []
    for pattern in patterns:
        label = f"[{pattern.name}]"
        for match in pattern.regex.finditer(text):
            if match.end() > match.start():
                found.append(Found(match.start(), match.end(), "custom", label))
    return found


# --- together --------------------------------------------------------------------------------------


# What a text must hold for a detector to run: simple patterns, a tenth of the detectors' time.
_EIGHT_DIGITS = re.compile(r"\d{4}[ -]?\d{4}")
_IBAN_START = re.compile(r"[A-Z]{2}\d\d")
_IPV4_START = re.compile(r"\d\.\d{1,3}\.\d{1,3}\.\d")
_IPV6_START = re.compile(r":[0-9A-Fa-f]{0,4}:")


def find_personal_data(text: str, patterns: Sequence[CustomPattern] = ()) -> list[Found]:
    """Every span of personal data in `text`, sorted and not overlapping: of two that overlap, the
    longer is kept, and of two as long the more specific (PRIORITY)."""
    if not text:
        return []
    candidates: list[Found] = []
    if "@" in text or "%40" in text:
        candidates += _emails(text)
    if _SEVEN_DIGITS.search(text):
        candidates += _phones(text)
        if _EIGHT_DIGITS.search(text):
            candidates += _cards(text)
    if _IBAN_START.search(text):
        candidates += _ibans(text)
    candidates += _secrets(text)
    candidates += _ips(text)
    if patterns:
        candidates += _custom(text, patterns)
    return _without_overlaps(candidates)


def _without_overlaps(candidates: list[Found]) -> list[Found]:
    if len(candidates) < 2:
        return candidates
    candidates.sort(key=lambda f: (f.start - f.end, PRIORITY[f.kind], f.start))
    starts: list[int] = []
    kept: list[Found] = []
    for candidate in candidates:
        i = bisect.bisect_left(starts, candidate.start)
        if i > 0 and kept[i - 1].end > candidate.start:
            continue
        if i < len(kept) and kept[i].start < candidate.end:
            continue
        starts.insert(i, candidate.start)
        kept.insert(i, candidate)
    return kept


def mask(text: str, patterns: Sequence[CustomPattern] = ()) -> str:
    found = find_personal_data(text, patterns)
    if not found:
        return text
    parts, position = [], 0
    for span in found:
        parts.append(text[position : span.start])
        parts.append(span.label)
        position = span.end
    parts.append(text[position:])
    return "".join(parts)


def mask_value(value: Any, patterns: Sequence[CustomPattern] = ()) -> Any:
    """`value` with every string in it masked (dict keys stay). An integer holding personal data (a card
    or phone number stored as a JSON number) becomes the masked string."""
    if isinstance(value, str):
        return mask(value, patterns)
    if isinstance(value, dict):
        return {key: mask_value(item, patterns) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mask_value(item, patterns) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1_000_000:
        text = str(value)
        masked = mask(text, patterns)
        return value if masked == text else masked
    return value



# --- HTML pages ------------------------------------------------------------------------------------

# Tags inside a line of text: the text on either side of them is read as one ("<mark>mia</mark>@example.com"),
# so it is searched as one. Every other tag (div, p, li, td, br, pre, textarea, …) ends that text.
INLINE_TAGS = frozenset({
    "mark", "span", "b", "strong", "i", "em", "code", "small", "abbr", "time", "a", "sub", "sup", "u", "s",
    "del", "ins", "kbd", "var", "samp", "wbr", "q", "cite", "dfn", "bdi", "bdo", "data", "tt",
})
# Attributes whose values people read: shown as tooltips, read by screen readers, shown in a field or a
# dialog (hx-confirm). "value" and "data-*" too (_read_by_people), never one that addresses a page.
READ_ATTRIBUTES = frozenset({
    "title", "alt", "aria-label", "aria-description", "aria-valuetext", "aria-roledescription",
    "aria-placeholder", "placeholder", "label", "hx-confirm", "hx-prompt",
})
_META_TEXT = frozenset({"description", "og:title", "og:description", "twitter:title", "twitter:description"})
_URL_VALUE = re.compile(r"(?:https?://|/|\?)\S*\Z", re.IGNORECASE)
_ADDRESS_HREF = re.compile(r"(?:mailto|tel|sms|callto):", re.IGNORECASE)
# html.parser's own patterns (tagfind_tolerant, attrfind_tolerant): where each attribute's value is in the
# start tag's source, to replace it there. The names found are checked against the parser's.
_TAG_NAME = re.compile(r"<[a-zA-Z][^\t\n\r\f />\x00]*(?:\s|/(?!>))*")
_ATTRIBUTE = re.compile(
    r"""((?<=['"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*('[^']*'|"[^"]*"|(?![\'"])[^>\s]*))?(?:\s|/(?!>))*"""
)


def mask_html(html: str, patterns: Sequence[CustomPattern] = ()) -> str:
    """`html` (a page or a fragment) with the personal data in what people read masked: its text, read as
    a person reads it (entities decoded, text split by inline tags such as <mark> joined), and the
    attributes people read (READ_ATTRIBUTES, value, data-*, a description's content, mailto: links).
    URLs, script and style stay as they are. A span found in text split by inline tags becomes the label
    in its first part and nothing in the others, the tags between staying; everything not masked is the
    input byte for byte."""
    reader = _PageReader(html, patterns)
    reader.feed(html)
    reader.close()
    if not reader.edits:
        return html
    reader.edits.sort(key=lambda edit: edit[0])
    parts, position = [], 0
    for start, end, replacement in reader.edits:
        start = max(start, position)  # two spans sharing an entity (&NotEqualTilde;) replace it once
        parts.append(html[position:start])
        parts.append(replacement)
        position = max(position, end)
    parts.append(html[position:])
    return "".join(parts)


class _PageReader(HTMLParser):
    """Reads a page and notes the edits that mask it: (start, end, replacement) in the page's source."""

    def __init__(self, source: str, patterns: Sequence[CustomPattern]) -> None:
        super().__init__(convert_charrefs=False)
        self.source = source
        self.patterns = patterns
        self.edits: list[tuple[int, int, str]] = []
        # The text read as one, in pieces: (offset in the source, the source, the text read).
        self.run: list[tuple[int, str, str]] = []
        self.line_starts = [0]
        newline = source.find("\n")
        while newline != -1:
            self.line_starts.append(newline + 1)
            newline = source.find("\n", newline + 1)

    def source_offset(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_data(self, data: str) -> None:
        if self.cdata_elem not in ("script", "style"):  # newer parsers read <textarea> and <title> raw too
            self.run.append((self.source_offset(), data, unescape(data) if "&" in data else data))

    def handle_entityref(self, name: str) -> None:
        self.reference(1 + len(name))

    def handle_charref(self, name: str) -> None:
        self.reference(2 + len(name))

    def reference(self, length: int) -> None:
        start = self.source_offset()
        end = start + length + (self.source.startswith(";", start + length))
        raw = self.source[start:end]
        self.run.append((start, raw, unescape(raw)))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in INLINE_TAGS:
            self.end_run()
        self.mask_attributes(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag not in INLINE_TAGS:
            self.end_run()

    def handle_decl(self, decl: str) -> None:
        self.end_run()

    def handle_pi(self, data: str) -> None:
        self.end_run()

    def unknown_decl(self, data: str) -> None:
        self.end_run()

    def close(self) -> None:
        super().close()
        self.end_run()

    def end_run(self) -> None:
        """Masks the text read as one: the first piece a span touches takes its label, the others lose
        their part of it."""
        run, self.run = self.run, []
        if not run:
            return
        text = run[0][2] if len(run) == 1 else "".join(piece[2] for piece in run)
        if not self.patterns and text.isspace():
            return
        found = find_personal_data(text, self.patterns)
        if not found:
            return
        starts, position = [], 0
        for piece in run:
            starts.append(position)
            position += len(piece[2])
        for span in found:
            first = bisect.bisect_right(starts, span.start) - 1
            last = bisect.bisect_left(starts, span.end) - 1
            for index in range(first, last + 1):
                offset, raw, read = run[index]
                replacement = escape(span.label, quote=False) if index == first else ""
                if raw != read:  # an entity: replaced whole
                    self.edits.append((offset, offset + len(raw), replacement))
                    continue
                low = max(span.start - starts[index], 0)
                high = min(span.end - starts[index], len(raw))
                self.edits.append((offset + low, offset + high, replacement))

    def mask_attributes(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        masked = {}
        for index, (name, value) in enumerate(attrs):
            if value and _read_by_people(tag, name, value, attrs):
                replacement = mask(value, self.patterns)
            elif value and name in LINK_ATTRIBUTES and "?" in value:
                replacement = mask_url_query(value, self.patterns)
            else:
                continue
            if replacement != value:
                masked[index] = replacement
        if not masked:
            return
        start, text = self.source_offset(), self.get_starttag_text()
        values = _attribute_values(text)
        if [name.lower() for name, _ in values] != [name for name, _ in attrs]:
            # Not split as the parser split it: the tag written again, its values quoted and escaped.
            rebuilt = "".join(
                f" {name}" if value is None else f' {name}="{escape(masked.get(index, value))}"'
                for index, (name, value) in enumerate(attrs)
            )
            self.edits.append((start, start + len(text), f"<{tag}{rebuilt}{'/>' if text.endswith('/>') else '>'}"))
            return
        for index, replacement in masked.items():
            low, high = values[index][1]
            quote = text[low] if text[low] in "'\"" else '"'  # an unquoted value gets quotes: a label has spaces
            self.edits.append((start + low, start + high, f"{quote}{escape(replacement)}{quote}"))


# Attributes that address a page: their path stays (it names a session by its key), the values of their
# query string are masked (a link that traces a value, `?trace=M-12345678`, or searches for it).
LINK_ATTRIBUTES = frozenset({"href", "src", "action", "formaction", "hx-get", "hx-post", "hx-put", "hx-patch",
                             "hx-delete", "data-state-url"})


def mask_url_query(url: str, patterns: Sequence[CustomPattern]) -> str:
    address, _, rest = url.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    pairs = parse_qsl(query, keep_blank_values=True)
    masked = [(key, mask(value, patterns)) for key, value in pairs]
    if masked == pairs:
        return url
    return f"{address}?{urlencode(masked)}{hash_mark}{fragment}"


def _read_by_people(tag: str, name: str, value: str, attrs: list[tuple[str, str | None]]) -> bool:
    if name in READ_ATTRIBUTES:
        return True
    if name == "value":
        return not _URL_VALUE.match(value) and ("name", "csrfmiddlewaretoken") not in attrs
    if name.startswith("data-"):
        return "url" not in name and "csrf" not in name and not _URL_VALUE.match(value)
    if name == "content":
        return tag == "meta" and any(key in ("name", "property") and kind in _META_TEXT for key, kind in attrs)
    if name == "href":
        return _ADDRESS_HREF.match(value) is not None
    return False


def _attribute_values(tag_text: str) -> list[tuple[str, tuple[int, int]]]:
    """Each attribute of a start tag's source, with where its value (quotes included) is in it."""
    values = []
    position = _TAG_NAME.match(tag_text).end()
    while match := _ATTRIBUTE.match(tag_text, position):
        values.append((match.group(1), match.span(3) if match.group(2) else (-1, -1)))
        position = match.end()
    return values
