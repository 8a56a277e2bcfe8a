"""Writes corpus.jsonl beside this file: messages of support chats, tool calls and tool results, and log
lines, holding personal data of known kinds at known places, and hard negatives (shapes real agent
transcripts are full of and that must stay: order and user ids, reservation codes, prices, dates,
timestamps, versions, git SHAs, UUIDs, paths, line numbers, Luhn-invalid numbers, tracking and flight
numbers). Masking is measured on it (tests/test_masking.py, tools/masking_report.py).

How: templates of messages written by hand after the shapes of tests/data's transcripts (tau-bench's
airline and retail tool results, SWE-agent and Codex command output), filled with values generated
from a fixed seed, so the same file comes out on every run (of the same `phonenumbers` version, whose
example numbers it starts from): `.venv/bin/python tests/pii/make_corpus.py`.
The values: e-mail addresses of many shapes (plus-addressing, subdomains, non-ASCII, in JSON, Markdown
links, headers); phone numbers of 30 countries from libphonenumber's example numbers (package
`phonenumbers`) with new last digits, kept when still valid, written international (+, 00, 011),
E.164 and nationally; card numbers of each issuer with a computed Luhn digit, grouped or not; IBANs of
16 countries with their BBAN structure and computed ISO 13616 check digits; API keys and tokens of the
providers' published shapes; IPv4 and IPv6 addresses. Only the standard library and `phonenumbers`.

Each line: {"text": ..., "spans": [{"start", "end", "kind"}]}, kind one of email, phone, card, iban,
secret, ip. A secret's span is the secret alone (the value of `password=…`, the token after "Bearer").
"""

import base64
import json
import random
import string
from pathlib import Path

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType

SEED = 13616
OUT = Path(__file__).with_name("corpus.jsonl")
rng = random.Random(SEED)


class Message:
    """A text put together piece by piece, remembering where each piece of personal data went."""

    def __init__(self):
        self.parts: list[str] = []
        self.spans: list[dict] = []
        self.length = 0

    def text(self, value: str) -> "Message":
        self.parts.append(value)
        self.length += len(value)
        return self

    def pii(self, value: str, kind: str) -> "Message":
        self.spans.append({"start": self.length, "end": self.length + len(value), "kind": kind})
        return self.text(value)

    def record(self) -> dict:
        text = "".join(self.parts)
        return {"text": text, "spans": self.spans}


def fill(template: str, **values) -> dict:
    """A record from a template: each {name} is replaced by values[name], a (text, kind) pair (kind None
    for text that is not personal data) or a plain string."""
    message = Message()
    for literal, field, _, _ in string.Formatter().parse(template):
        message.text(literal)
        if field is None:
            continue
        value = values[field]
        if isinstance(value, tuple):
            text, kind = value
            message.pii(text, kind) if kind else message.text(text)
        else:
            message.text(value)
    return message.record()


def pick(items):
    return items[rng.randrange(len(items))]


# --- values ----------------------------------------------------------------------------------------

FIRST = ["mia", "noah", "jane", "raj", "wei", "yuki", "olga", "lucas", "amara", "mateo", "emma", "liam", "priya",
         "hiroshi", "ana", "lea", "kwame", "fatima", "sven", "chloe", "omar", "ines", "tomasz", "aisha", "diego",
         "hannah", "arjun", "mei", "pierre", "sofia"]
LAST = ["li", "garcia", "smith", "kowalski", "nakamura", "okafor", "muller", "rossi", "dubois", "patel", "chen",
        "johansson", "silva", "nguyen", "oconnor", "haddad", "novak", "schmidt", "kim", "fernandez"]
DOMAINS = ["gmail.com", "outlook.com", "yahoo.co.uk", "hotmail.fr", "proton.me", "icloud.com", "web.de",
           "t-online.de", "example.com", "mail.example.org", "support.acme-corp.io", "eng.bigcompany.com",
           "students.uni-heidelberg.de", "example.co.jp", "customers.shop-online.com.au", "company.ie",
           "fastmail.fm", "corp.example.travel", "alumni.stanford.edu", "libero.it"]
IDN_EMAILS = ["josé.garcía@correo.es", "zoë.martin@example.com", "müller@bücher.de", "anna@пример.рф",
              "info@xn--bcher-kva.example", "françois.dupont@société.fr", "søren@firma.dk", "李雷@例子.中国"]


def email() -> str:
    first, last = pick(FIRST), pick(LAST)
    shape = rng.randrange(9)
    local = [f"{first}.{last}", f"{first}{last}", f"{first[0]}.{last}", f"{first}_{last}",
             f"{first}+{pick(['shop', 'travel', 'newsletter', 'work', 'x'])}",
             f"{first}.{last}+{rng.randrange(1, 99)}", f"{first}.{last}{rng.randrange(1970, 2010)}",
             f"{first[0].upper()}{last.capitalize()}", f"{last}-{first}"][shape]
    return f"{local}@{pick(DOMAINS)}"


PHONE_REGIONS = ["US", "CA", "GB", "DE", "FR", "IT", "ES", "NL", "BE", "CH", "AT", "SE", "NO", "DK", "PL", "IE",
                 "PT", "AU", "NZ", "JP", "KR", "IN", "CN", "SG", "BR", "MX", "ZA", "AE", "IL", "TR"]


def phone_number(region: str, kind=None) -> phonenumbers.PhoneNumber:
    kind = kind or pick([PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE])
    example = phonenumbers.example_number_for_type(region, kind) or phonenumbers.example_number(region)
    national = str(example.national_number)
    for _ in range(50):
        tail = "".join(str(rng.randrange(10)) for _ in range(3))
        candidate = phonenumbers.parse(f"+{example.country_code}{national[:-3]}{tail}")
        if phonenumbers.is_valid_number(candidate) and phonenumbers.region_code_for_number(candidate) == region:
            return candidate
    return example


def phone_text(number: phonenumbers.PhoneNumber, style: str) -> str:
    international = phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL)
    if style == "international":
        return international
    if style == "e164":
        return phonenumbers.format_number(number, PhoneNumberFormat.E164)
    if style == "dashes":
        return international.replace(" ", "-")
    if style == "dots":
        return international.replace(" ", ".").replace("-", ".")
    if style == "00":
        return "00" + international[1:]
    if style == "011":
        return "011 " + international[1:]
    if style == "national":
        return phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
    raise ValueError(style)


def us_phone() -> str:
    number = phone_number(pick(["US", "CA"]))
    digits = str(number.national_number)
    area, exchange, line = digits[:3], digits[3:6], digits[6:]
    return pick([f"({area}) {exchange}-{line}", f"{area}-{exchange}-{line}", f"{area}.{exchange}.{line}",
                 f"1-{area}-{exchange}-{line}", f"+1 ({area}) {exchange}-{line}", f"+1{digits}",
                 f"{area} {exchange} {line}", f"+1-{area}-{exchange}-{line}"])


def luhn_complete(partial: str) -> str:
    total = 0
    for i, char in enumerate(reversed(partial)):
        digit = int(char)
        if i % 2 == 0:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return partial + str((10 - total % 10) % 10)


CARD_BRANDS = {  # prefix choices, length
    "visa": (["4"], 16), "visa13": (["4"], 13), "mastercard": (["51", "52", "53", "54", "55", "2221", "2720"], 16),
    "amex": (["34", "37"], 15), "discover": (["6011", "65", "644"], 16), "jcb": (["3528", "3589"], 16),
    "diners": (["36", "300"], 14), "unionpay": (["62"], 16),
}


def card_digits(brand: str) -> str:
    prefixes, length = CARD_BRANDS[brand]
    prefix = pick(prefixes)
    body = prefix + "".join(str(rng.randrange(10)) for _ in range(length - len(prefix) - 1))
    return luhn_complete(body)


def card_text(digits: str, style: str) -> str:
    if style == "plain":
        return digits
    separator = " " if style == "spaces" else "-"
    if len(digits) == 15:
        groups = [digits[:4], digits[4:10], digits[10:]]
    elif len(digits) == 14:
        groups = [digits[:4], digits[4:10], digits[10:]]
    else:
        groups = [digits[i : i + 4] for i in range(0, len(digits), 4)]
    return separator.join(groups)


def not_luhn(digits: str) -> str:
    last = (int(digits[-1]) + rng.randrange(1, 10)) % 10
    return digits[:-1] + str(last)


IBAN_FORMATS = {  # BBAN structure of the ISO 13616 registry: n digits, a letters, c letters or digits
    "DE": "8n10n", "GB": "4a6n8n", "FR": "5n5n11c2n", "ES": "4n4n1n1n10n", "IT": "1a5n5n12c", "NL": "4a10n",
    "BE": "3n7n2n", "CH": "5n12c", "AT": "5n11n", "PL": "8n16n", "SE": "3n16n1n", "IE": "4a6n8n",
    "PT": "4n4n11n2n", "DK": "4n9n1n", "NO": "4n6n1n", "FI": "3n11n",
}


def iban(country: str) -> str:
    bban = ""
    structure = IBAN_FORMATS[country]
    number = ""
    for char in structure:
        if char.isdigit():
            number += char
            continue
        alphabet = {"n": string.digits, "a": string.ascii_uppercase, "c": string.digits + string.ascii_uppercase}
        bban += "".join(pick(alphabet[char]) for _ in range(int(number)))
        number = ""
    rearranged = bban + country + "00"
    numeric = "".join(str(int(char, 36)) for char in rearranged)
    check = 98 - int(numeric) % 97
    return f"{country}{check:02d}{bban}"


def grouped(value: str) -> str:
    return " ".join(value[i : i + 4] for i in range(0, len(value), 4))


ALNUM = string.ascii_letters + string.digits


def chars(alphabet: str, n: int) -> str:
    return "".join(pick(alphabet) for _ in range(n))


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def secret(shape: str) -> str:
    if shape == "openai":
        return "sk-" + chars(ALNUM, 48)
    if shape == "openai_project":
        return "sk-proj-" + chars(ALNUM + "_-", 124) + "T3BlbkFJ" + chars(ALNUM + "_-", 24)
    if shape == "anthropic":
        return "sk-ant-api03-" + chars(ALNUM + "_-", 93) + "AA"
    if shape == "aws":
        return "AKIA" + chars(string.ascii_uppercase + "234567", 16)
    if shape == "github":
        return pick(["ghp_", "gho_", "ghs_"]) + chars(ALNUM, 36)
    if shape == "github_pat":
        return "github_pat_" + chars(ALNUM, 22) + "_" + chars(ALNUM, 59)
    if shape == "slack":
        return f"{pick(['xoxb', 'xoxp'])}-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-{chars(ALNUM, 24)}"
    if shape == "stripe":
        return pick(["sk_live_", "pk_live_", "rk_live_", "sk_test_"]) + chars(ALNUM, pick([24, 99]))
    if shape == "google":
        return "AIza" + chars(ALNUM + "_-", 35)
    if shape == "jwt":
        header = b64url({"alg": "HS256", "typ": "JWT"})
        payload = b64url({"sub": str(rng.randrange(10**6)), "name": pick(FIRST).capitalize(),
                          "iat": 1715785200 + rng.randrange(10**6)})
        return f"{header}.{payload}.{chars(ALNUM + '_-', 43)}"
    if shape == "password":
        return pick(["hunter2", "Tr0ub4dor&3", "S3cure!Pass", "winter2024!", "P@ssw0rd123", "qwerty-987",
                     "CorrectHorseBattery9", "m1ssion-control", "Zx8#kq2LwP"])
    if shape == "aws_secret":
        return chars(ALNUM + "/+", 40)
    raise ValueError(shape)


def ipv4(private: bool = False) -> str:
    if private:
        return pick([f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                     f"192.168.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                     f"172.{rng.randrange(16, 32)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"])
    first = pick([23, 31, 45, 52, 66, 81, 92, 104, 141, 151, 185, 203, 212])
    return f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def ipv6() -> str:
    groups = [f"{rng.randrange(65536):x}" for _ in range(8)]
    return pick([
        "2001:db8:" + ":".join(groups[2:]),
        f"2a03:2880:{groups[2]}:{groups[3]}::{groups[7]}",
        f"fe80::{groups[4]}:{groups[5]}:{groups[6]}:{groups[7]}",
        "2001:0db8:85a3:0000:0000:8a2e:0370:" + f"{rng.randrange(65536):04x}",
        f"2600:1f18:{groups[2]}:{groups[3]}:{groups[4]}:{groups[5]}:{groups[6]}:{groups[7]}",
    ])


# Values that are not personal data, as tau-bench and agent transcripts write them.
def order_id():
    return f"#W{rng.randrange(10**6, 10**7)}"


def user_id():
    return f"{pick(FIRST)}_{pick(LAST)}_{rng.randrange(1000, 10000)}"


def reservation():
    return chars(string.ascii_uppercase + string.digits, 6)


def sha():
    return "".join(pick("0123456789abcdef") for _ in range(40))


def uuid():
    h = sha()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def price():
    return pick([f"${rng.randrange(1, 9)},{rng.randrange(100, 999)}.{rng.randrange(10, 99)}",
                 f"${rng.randrange(10, 999)}.{rng.randrange(10, 99)}", f"{rng.randrange(100, 9999)}.00 USD",
                 f"€{rng.randrange(10, 999)},{rng.randrange(10, 99)}"])


def iso_time():
    return (f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
            f"{rng.randrange(60):02d}:{rng.randrange(60):02d}" + pick(["Z", ".123456+00:00", "-05:00", ""]))


# --- records ---------------------------------------------------------------------------------------

records: list[dict] = []


def add(template: str, **values):
    records.append(fill(template, **values))


def emails():
    chat = [
        "Hi, I can't log in. My account email is {e}, can you reset it?",
        "Sure, please send the receipt to {e} instead of my old address.",
        "You can reach me at {e} or just reply here.",
        "Contact: {e}",
        "From: {name} <{e}>\nTo: {support}\nSubject: Refund for order {order}",
        "please update my email to {e} thanks",
        "I'm emailing from {e}, which is the address on the booking.",
        "Write to [{e}](mailto:{e}) if the link expires.",
        "cc {e}, {e2}",
        "EMAIL: {e}",
    ]
    tool = [
        '{{"user_id": "{uid}", "email": "{e}"}}',
        '{{"name": {{"first_name": "{first}", "last_name": "{last}"}}, "email": "{e}", "dob": "1990-04-05"}}',
        "2024-05-15 15:00:03,114 INFO auth login ok user={e} ip_hash=9f2c1",
        'send_email(to="{e}", subject="Your reservation {res}")',
        "| {first} | {e} | active |",
        '{{"recipients": ["{e}", "{e2}"], "template": "booking_confirmation"}}',
    ]
    for i in range(60):
        first, last = pick(FIRST).capitalize(), pick(LAST).capitalize()
        e = IDN_EMAILS[i % len(IDN_EMAILS)] if i % 6 == 5 else email()
        e2 = email()
        if i % 11 == 3:
            e = e.upper() if i % 2 else e.capitalize()
        template = pick(chat) if i % 2 else pick(tool)
        add(template, e=(e, "email"), e2=(e2, "email"), name=f"{first} {last}", first=first, last=last,
            uid=user_id(), order=order_id(), res=reservation(), support=("support@acme-corp.io", "email"))


def phones():
    chat = [
        "You can call me on {p}.",
        "My phone number is {p}",
        "Please text {p} when the driver arrives.",
        "WhatsApp: {p}",
        "I changed my number, the new one is {p} (mobile).",
        "Our hotline {p} is open 24/7.",
        "call me back at {p} please, I'm abroad",
        "The hotel's front desk: {p}; ask for {name}.",
    ]
    tool = [
        '{{"user_id": "{uid}", "phone": "{p}"}}',
        '{{"name": "{name}", "phone_number": "{p}", "country": "{country}"}}',
        "2024-05-15T15:00:00Z sms.send to={p} status=queued",
        'update_contact(user_id="{uid}", phone="{p}")',
        "Emergency contact: {name}, {p}",
    ]
    styles = ["international", "e164", "dashes", "international", "00", "dots", "011"]
    for i in range(90):
        region = PHONE_REGIONS[i % len(PHONE_REGIONS)]
        number = phone_number(region)
        style = styles[i % len(styles)]
        if style == "011" and region in ("US", "CA"):
            style = "international"
        if style == "dots" and region not in ("FR", "BE", "US", "CA", "DE", "IT", "ES", "NL", "CH", "PT"):
            style = "international"
        p = phone_text(number, style)
        template = pick(chat) if i % 2 else pick(tool)
        add(template, p=(p, "phone"), uid=user_id(), name=f"{pick(FIRST).capitalize()} {pick(LAST).capitalize()}",
            country=region)
    for _ in range(30):  # North American numbers as people write them
        template = pick(chat + tool)
        add(template, p=(us_phone(), "phone"), uid=user_id(),
            name=f"{pick(FIRST).capitalize()} {pick(LAST).capitalize()}", country="US")
    national = [  # numbers of other countries written nationally, after a word saying what they are
        "My mobile is {p}, I'm in {city} this week.",
        "Tel. {p}",
        "please call {p} (that's the {city} office)",
        "phone: {p}",
    ]
    cities = {"GB": "London", "DE": "Berlin", "FR": "Paris", "IT": "Milan", "ES": "Madrid", "NL": "Utrecht",
              "AU": "Sydney", "IN": "Pune", "JP": "Osaka", "BR": "Recife", "IE": "Dublin", "CH": "Zurich"}
    for region, city in cities.items():
        number = phone_number(region)
        add(pick(national), p=(phone_text(number, "national"), "phone"), city=city)


def cards():
    chat = [
        "My card number is {c}, expiry 09/27.",
        "can you charge {c} instead? the visa ending {last4} expired",
        "Card: {c}",
        "I was charged twice on {c} for order {order}.",
        "Here you go: {c}",
        "the number on the front is {c} and the name is {name}",
    ]
    tool = [
        '{{"payment_method": {{"type": "card", "number": "{c}", "exp_month": 9, "exp_year": 2027}}}}',
        '{{"card_number": "{c}", "cardholder": "{name}", "amount": "{price}"}}',
        "2024-05-15 15:00:01 WARN payments charge declined card={c} code=insufficient_funds",
        'add_payment_method(user_id="{uid}", card_number="{c}")',
        "POST /v1/charges card[number]={c}&amount=12900",
    ]
    brands = list(CARD_BRANDS)
    for i in range(64):
        digits = card_digits(brands[i % len(brands)])
        style = ["spaces", "dashes", "plain", "spaces"][i % 4]
        template = pick(chat) if i % 2 else pick(tool)
        add(template, c=(card_text(digits, style), "card"), last4=f"{rng.randrange(10000):04d}", order=order_id(),
            name=f"{pick(FIRST).capitalize()} {pick(LAST).capitalize()}", price=price(), uid=user_id())


def ibans():
    chat = [
        "Please send the refund to my IBAN {i}",
        "IBAN: {i} (account holder {name})",
        "Can you wire it to {i}? It's my {country} account.",
        "my bank details: {i}, BIC {bic}",
        "the iban is {i}",
    ]
    tool = [
        '{{"refund": {{"method": "bank_transfer", "iban": "{i}", "bic": "{bic}"}}}}',
        '{{"beneficiary": "{name}", "iban": "{i}", "amount": "{price}"}}',
        "2024-05-15 15:02:11 INFO sepa.payout queued iban={i} amount=129.00",
        'create_refund(order_id="{order}", iban="{i}")',
    ]
    countries = list(IBAN_FORMATS)
    for i in range(48):
        country = countries[i % len(countries)]
        value = iban(country)
        text = grouped(value) if i % 3 != 2 else value
        template = pick(chat) if i % 2 else pick(tool)
        add(template, i=(text, "iban"), name=f"{pick(FIRST).capitalize()} {pick(LAST).capitalize()}",
            country=country, bic=pick(["DEUTDEFF", "NWBKGB2L", "BNPAFRPP", "INGBNL2A", "UBSWCHZH80A"]),
            price=price(), order=order_id())


def secrets():
    shapes = ["openai", "openai_project", "anthropic", "aws", "github", "github_pat", "slack", "stripe", "google",
              "jwt"]
    chat = [
        "I accidentally pasted my key: {s} can you tell me why it fails?",
        "here's the key {s}",
        "Using {s} I get a 401.",
        "export OPENAI_API_KEY={s}",
    ]
    tool = [
        '{{"api_key": "{s}", "model": "gpt-4o"}}',
        "curl https://api.example.com/v1/items -H 'Authorization: Bearer {s}'",
        "$ env | grep KEY\nSERVICE_KEY={s}\nPATH=/usr/local/bin:/usr/bin",
        "config.yaml:\n  provider: openai\n  key: {s}\n  timeout: 30",
    ]
    for i in range(50):
        value = secret(shapes[i % len(shapes)])
        template = pick(chat) if i % 2 else pick(tool)
        add(template, s=(value, "secret"))
    assignments = [
        "DB_PASSWORD={v}",
        '{{"username": "{uid}", "password": "{v}"}}',
        "mysql -u admin --password={v} -h db.internal",
        "password: {v}",
        "aws_secret_access_key = {v}",
        "My password is hunter-like, fine: password={v}",
        'client_secret="{v}"',
        "login(user='{uid}', password='{v}')",
    ]
    for i in range(24):
        template = assignments[i % len(assignments)]
        shape = "aws_secret" if "aws_secret" in template else "password"
        add(template, v=(secret(shape), "secret"), uid=user_id())
    for _ in range(6):
        token = chars(ALNUM + "._-", 40)
        add(pick(["Authorization: Bearer {t}", 'headers = {{"Authorization": "Bearer {t}"}}',
                  "> GET /api/me HTTP/1.1\n> Authorization: Bearer {t}\n> Accept: */*"]), t=(token, "secret"))
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(chars(ALNUM + "+/", 64) for _ in range(4)) + \
          "\n-----END RSA PRIVATE KEY-----"
    add("cat ~/.ssh/id_rsa\n{k}\n$ ", k=(key, "secret"))


def ips():
    templates = [
        '{a} - - [15/May/2024:15:00:00 +0000] "GET /api/orders HTTP/1.1" 200 512 "-" "Mozilla/5.0"',
        "May 15 15:00:01 web1 sshd[2211]: Failed password for root from {a} port 52144 ssh2",
        '{{"client_ip": "{a}", "user_agent": "curl/8.4.0"}}',
        "Connecting to {a}:5432... connected.",
        "Login from a new device ({a}, {city}). Was this you?",
        "X-Forwarded-For: {a}, {b}",
        "ping {a}\n64 bytes from {a}: icmp_seq=1 ttl=57 time=11.2 ms",
        "the server is at {a}, can you whitelist it?",
    ]
    for i in range(36):
        template = templates[i % len(templates)]
        a = ipv4(private=i % 4 == 3) if i % 3 else ipv6()
        if template.startswith("Connecting") and ":" in a:
            template = "Connecting to [{a}]:5432... connected."
        add(template, a=(a, "ip"), b=(ipv4(), "ip"), city=pick(["Lisbon", "Austin", "Seoul", "Lagos"]))


def negatives():
    templates = [
        "Sure, my user ID is {uid}.",
        "I want to cancel order {order}, it hasn't shipped yet.",
        "Your reservation {res} is confirmed: flight {flight} on 2024-05-20 at 15:00, seat 14C.",
        '{{"order_id": "{order}", "user_id": "{uid}", "status": "pending", "total": "{price}"}}',
        '{{"payment_methods": {{"credit_card_{n7}": {{"source": "credit_card", "brand": "visa", "last_four": "{last4}", "id": "credit_card_{n7}"}}}}}}',
        '{{"gift_card_{n7}": {{"source": "gift_card", "balance": 128, "id": "gift_card_{n7}"}}}}',
        "The total comes to {price}, including the $30 insurance.",
        "Refund of {price} issued on 05/15/2024; it takes 5-7 business days.",
        "created_at: {ts}",
        '{{"created_at": "{ts}", "updated_at": "{ts2}", "id": "{uuid}"}}',
        "Python 3.11.4 (main, Jun  7 2023, 10:13:09) [GCC 12.2.0] on linux",
        "Collecting requests==2.31.0\nCollecting mypkg==1.2.3.4\nSuccessfully installed mypkg-1.2.3.4-beta",
        "Downloading torch-2.1.0.1-cp311-cp311-manylinux1_x86_64.whl (670.2 MB)",
        "commit {sha}\nAuthor: CI Bot\nDate:   Wed May 15 15:00:00 2024 +0000",
        "HEAD is now at {short} Fix off-by-one in pagination",
        'File "/usr/lib/python3.11/site-packages/django/db/models/query.py", line {line}, in get',
        "tests/test_orders.py:{line}: AssertionError: assert 404 == 200",
        "/var/log/app/2024/05/15/worker-3.log: 1523 lines",
        "src/handlers/v2/http_404.py:88:12: E501 line too long (131 > 110 characters)",
        "request_id={uuid} took 1234.56 ms",
        "Reference number: {bad_card}",
        "Tracking: {tracking}",
        "Your package {tracking} is out for delivery.",
        "Flight {flight} departs 15:40, arrives 18:05 (local time).",
        "Processed 12,345,678 rows in 00:01:23.456",
        "epoch {epoch} -> {ts}",
        "Server running at http://127.0.0.1:8000/ and 0.0.0.0:5432; ::1 also bound",
        "$ git remote -v\norigin  git@github.com:acme/ctxweb.git (fetch)",
        "npm i @types/node@20.11.5 lodash@4.17.21",
        "static/img/logo@2x.png 24K",
        "max_tokens: 4096, temperature: 0.2, tokens used: 1834",
        'api_key = os.environ["OPENAI_API_KEY"]',
        "client = OpenAI(api_key=settings.OPENAI_API_KEY)",
        "def login(username: str, password: str) -> Session:",
        '{{"password": null, "password_reset_required": true}}',
        "token: <your-token-here>",
        "Password: please type it again below.",
        "pip install scikit-learn; sk-learn-compatible-estimator-checks passed",
        "ISBN 978-0-306-40615-7",
        "Error 0x80070005 at offset 0x7ffd5a2b",
        "Ticket SUP-20240515-0042 was merged into SUP-20240514-0913.",
        "for i in range(10): x = a[1::2] + b[::-1]",
        "std::vector<int> v; std::map<std::string, int> m;",
        "MAC 00:1A:2B:3C:4D:5E on eth0, uptime 12:30:45",
        "Version: 10.0.19045.3803; build 22631",
        "user agent Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0.0.0 Safari/537.36",
        "The zip is 78750 and the street is 975 Sunset Drive, Suite 217.",
        "There are 3 passengers, 2 checked bags and 1 pet; membership gold.",
        "shape (1024, 768, 3) dtype=float32 mean=0.4481",
        "Amount due: 1 234 567 890 UGX",
        "Order numbers 4000123412341235 and 5500 1234 5678 9012 were archived.",
        "DHL waybill JD014600003828192873",
        "tau: {uid} booked {res} with certificate_{n7}",
    ]
    for i in range(120):
        template = templates[i % len(templates)]
        digits = card_digits(pick(["visa", "mastercard", "discover"]))
        bad = not_luhn(digits)
        tracking = pick(["1Z999AA10123456784", "9400 1000 0000 0000 0000 00", "9400111899223456789012",
                         "7489 1234 5678", "JJD0099999999"])
        add(template, uid=user_id(), order=order_id(), res=reservation(), flight=pick(["HAT170", "HAT083", "UA 1234",
            "LH400", "BA 287"]), price=price(), n7=str(rng.randrange(10**6, 10**7)), last4=f"{rng.randrange(10000):04d}",
            ts=iso_time(), ts2=iso_time(), uuid=uuid(), sha=sha(), short=sha()[:7], line=str(rng.randrange(10, 4000)),
            bad_card=card_text(bad, pick(["spaces", "plain", "dashes"])), tracking=tracking,
            epoch=str(1715785200 + rng.randrange(10**6)))


def mixed():
    """Whole tool results and chats holding several kinds among ids and amounts."""
    for _ in range(30):
        first, last = pick(FIRST).capitalize(), pick(LAST).capitalize()
        region = pick(PHONE_REGIONS)
        template = pick([
            '{{"name": {{"first_name": "{first}", "last_name": "{last}"}}, "address": {{"address1": "975 Sunset '
            'Drive", "city": "Austin", "zip": "78750"}}, "email": "{e}", "phone": "{p}", "dob": "1990-04-05", '
            '"payment_methods": {{"credit_card_{n7}": {{"brand": "visa", "last_four": "{last4}"}}}}, '
            '"orders": ["{order}"]}}',
            "Hi, this is {first} ({uid}). Order {order} never arrived. Email {e}, phone {p}. "
            "Refund to {i} please, not the card.",
            "2024-05-15T15:00:00Z payment.failed order={order} card={c} email={e} ip={a}",
            "Thanks {first}! I've updated your profile: email {e}, phone {p}. Reservation {res} is unchanged "
            "and the total is {price}.",
            "user {uid} from {a} changed password; new phone {p}; card on file {c}",
        ])
        add(template, first=first, last=last, e=(email(), "email"), p=(phone_text(phone_number(region),
            "international"), "phone"), n7=str(rng.randrange(10**6, 10**7)), last4=f"{rng.randrange(10000):04d}",
            order=order_id(), uid=user_id(), i=(grouped(iban(pick(list(IBAN_FORMATS)))), "iban"),
            c=(card_text(card_digits("visa"), "spaces"), "card"), a=(ipv4(), "ip"), res=reservation(), price=price())


def harder():
    """Shapes seen in support chats and agent runs that the templates above do not make: extensions,
    links, headers, URL query strings, CIDR blocks, SSH targets; and more look-alikes that must stay."""
    e, e2 = email(), email()
    local, domain = e.split("@")
    add("GET /unsubscribe?email={q}&list=weekly HTTP/1.1", q=(f"{local}%40{domain}", "email"))
    add("Please write to {e}.", e=(e, "email"))
    add("Reply-To: '{e}'", e=(e2, "email"))
    add("| name | email |\n|---|---|\n| {n} | {e} |", n=pick(FIRST).capitalize(), e=(email(), "email"))
    add("{e}: 3 failed logins in 10 minutes", e=(email(), "email"))
    add("call {p} ext. 204 and ask for billing", p=(us_phone(), "phone"))
    add("[Call us](tel:{p})", p=(phone_text(phone_number("GB"), "e164"), "phone"))
    add("Kontakt: Tel. {p}", p=(phone_text(phone_number("DE"), "international"), "phone"))
    add("Fax {p} (office hours only)", p=(phone_text(phone_number("FR"), "international"), "phone"))
    add('{{"contacts": [{{"type": "mobile", "value": "{p}"}}, {{"type": "home", "value": "{p2}"}}]}}',
        p=(phone_text(phone_number("IT"), "e164"), "phone"), p2=(phone_text(phone_number("ES"), "e164"), "phone"))
    add("sent OTP to {p} at 2024-05-15 15:00:00", p=(phone_text(phone_number("IN"), "e164"), "phone"))
    # national numbers with no word saying they are phones: found only when written the North American way
    add("the Madrid office is on {p}, open 9-17", p=(phone_text(phone_number("ES"), "national"), "phone"))
    add("Berlin: {p}", p=(phone_text(phone_number("DE"), "national"), "phone"))
    add("My card ending in {last4} was declined, the full number is {c}.", last4="7312",
        c=(card_text(card_digits("visa"), "spaces"), "card"))
    add("| card | exp |\n| {c} | 11/26 |", c=(card_text(card_digits("mastercard"), "dashes"), "card"))
    add("stripe.Charge.create(amount=2000, source={{'number': '{c}', 'cvc': '123'}})",
        c=(card_digits("amex"), "card"))
    add("IBAN:{i}", i=(iban("NL"), "iban"))
    add("Beneficiary: {n} ({i})", n=pick(LAST).capitalize(), i=(grouped(iban("GB")), "iban"))
    add("Kontoinhaber {n}, IBAN {i}, BIC DEUTDEFF", n=pick(LAST).capitalize(), i=(grouped(iban("DE")), "iban"))
    add("curl -H 'Authorization: token {t}' https://api.github.com/user", t=(secret("github"), "secret"))
    add("https://maps.googleapis.com/maps/api/geocode/json?address=Austin&key={k}", k=(secret("google"), "secret"))
    add("x-api-key: {k}", k=(chars(ALNUM, 32), "secret"))
    add('{{"access_token": "{t}", "token_type": "bearer", "expires_in": 3600}}', t=(secret("jwt"), "secret"))
    add("ANTHROPIC_API_KEY={k} python run.py", k=(secret("anthropic"), "secret"))
    add("password: '{v}'", v=(secret("password"), "secret"))
    add("    inet {a}/24 brd {b} scope global eth0", a=("10.0.2.15", "ip"), b=("10.0.2.255", "ip"))
    add("ssh ubuntu@{a} -i ~/.ssh/deploy.pem", a=(ipv4(), "ip"))
    add("open http://[{a}]:8080/health", a=("2001:db8::1f", "ip"))
    add("Blocked {a} after 20 attempts (rule 1042)", a=(ipv4(), "ip"))
    add("DNS: {a}, {b}", a=("1.1.1.1", "ip"), b=("8.8.8.8", "ip"))
    for text in [
        "Your card ending in 4242 will be charged $129.00.",
        "last_four: 7447, brand: visa",
        "Order 112-4567890-1234567 shipped via UPS.",
        "SKU 8472-1193-55 is back in stock.",
        "ZIP 78750-1234, Austin TX",
        "ABA routing number 021000021",
        "lat 40.7128 lon -74.0060",
        "ts=1715785200123 level=info msg=done",
        "Build 2024.05.15.1 deployed",
        "case 00123456 escalated",
        "account no. 123456789 (internal)",
        "sha256:9b2a4f1c0e8d7b6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa9988",
        "pointer 0x7ffd5a2b1c40, 6.022e23 molecules",
        "OID 1.3.6.1.4.1.311.21.8",
        "v1.2.3.4 released; see CHANGELOG",
        "Requirement already satisfied: idna<4,>=2.5 in ./venv/lib/python3.11/site-packages (3.7)",
        '"password_hash": "pbkdf2_sha256$600000$abc$def="',
        '"token_type": "bearer"',
        "the bearer of this ticket may board first",
        "api_key: ${OPENAI_API_KEY}",
        "password: '{{ vault_db_password }}'",
        "secret: false",
        "image@sha256 pinned, node@20 installed",
        "Invoice INV-2024-000123 for 1 234 567.89 EUR",
        "Call 911 in an emergency; press 0 for an operator.",
        "DE-1234 and AB12CD34EF56 are warehouse bin codes",
        "seat 23A, gate B12, terminal 3, boarding 14:35",
        "pytest tests/ -k 'test_1234' -n 4 --maxfail=1",
        "memory: 16384 MB, disk: 512000 MB, cpus: 8",
        "Luhn check failed for 4111 1111 1111 1112",
    ]:
        records.append({"text": text, "spans": []})


def main():
    emails()
    phones()
    cards()
    ibans()
    secrets()
    ips()
    negatives()
    mixed()
    harder()
    with OUT.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(records)} records, {sum(len(r['spans']) for r in records)} spans -> {OUT}")


if __name__ == "__main__":
    main()
