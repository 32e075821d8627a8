"""Values as people write them in a request: amounts, expressions, places, reasons, names, search text.

Pure text functions the argument filler (arguments.py) uses; each returns None
when the text does not state the value, never a default.
"""

import re

EXPRESSION = re.compile(
    r"(?:(?:sqrt|cbrt|log10|log|ln|exp|sin|cos|tan|abs|round|min|max|floor|ceil|pi|of|[\d.,+\-*/×÷^()%\s]))+",
    re.IGNORECASE,
)
ZONE = re.compile(r"\b[A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?\b")
PLACE = re.compile(r"\b(?:in|at|ở|tại)\s+([A-Za-zÀ-ỹ][\w .'-]*?)\s*(?:[?.!,]|$| right now| now| today)", re.IGNORECASE)
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
QUOTED = re.compile(r"[\"“”'‘’`]([^\"“”'‘’`]{2,200})[\"“”'‘’`]")
# Tokens that are names of things, not amounts: ids (M-300, SUMMER24, mem_lan00001), ISO dates, times, e-mails.
NOT_AMOUNTS = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b\d{4}-\d{2}-\d{2}(?:[T ][\d:]+(?:Z|[+-][\d:]+)?)?\b|\b\d{1,2}:\d{2}\b"
    r"|(?<![\w-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)(?!\d+(?:[.,]\d+)?(?:k|x|m|%)\b)[\w]+(?:[-_][\w]+)*(?![\w-])",
    re.IGNORECASE,
)
AMOUNT = re.compile(
    r"(?<![\w.,])(-?\d{1,3}(?:,\d{3})+|-?\d{1,3}(?:\.\d{3}){2,}|-?\d+(?:\.\d+)?)\s*"
    r"(k\b|m\b|x\b|%|thousand\b|million\b|billion\b|nghìn\b|ngàn\b|triệu\b|tỷ\b)?(?![\w])",
    re.IGNORECASE,
)
SCALE = {"k": 1e3, "thousand": 1e3, "nghìn": 1e3, "ngàn": 1e3, "m": 1e6, "million": 1e6, "triệu": 1e6,
         "billion": 1e9, "tỷ": 1e9}  # fmt: skip
UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen".split())}  # fmt: skip
TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORDS = "|".join([*UNITS, *TENS, *MULTIPLIERS])
NUMBER_WORD = re.compile(rf"\b(?:(?:{_NUMBER_WORDS})(?![a-z])(?:[\s-]+(?:and[\s-]+)?)?)+", re.IGNORECASE)
REASON = re.compile(
    r"(?:\bbecause(?: of)?|\bsince|\bdue to|\bfor|\bas|\breason:?|\bvì|\bdo|\blý do:?|\bbởi vì|,|;|—| - )\s+"
    r"([^,;]{5,})$",
    re.IGNORECASE,
)
NAMED = re.compile(r"\b(?:called|named|name it|titled|tên là|đặt tên là|tên)\s+[\"“']?([^\"”',.;]{3,120})", re.I)
WORD = re.compile(r"[\wÀ-ỹ][\wÀ-ỹ.@-]*[\wÀ-ỹ]|[\wÀ-ỹ]")


def arithmetic_expression(text: str) -> str | None:
    candidates = [m.group(0).strip(" ,.?") for m in EXPRESSION.finditer(text)]
    candidates = [c for c in candidates if re.search(r"\d", c) or re.search(r"\bpi\b", c, re.IGNORECASE)]
    return max(candidates, key=len) if candidates else None


def place(text: str) -> str | None:
    zone = ZONE.search(text)
    if zone:
        return zone.group(0)
    found = PLACE.search(text)
    return found.group(1).strip() if found else None


def tokens(text: str) -> list[str]:
    return WORD.findall(text)


def numbers(text: str) -> list[tuple[float, int, int]]:
    """(value, start, end) of each amount the text states: 150, 1,250,000, 1.200.000, 189k, 2 million, 40%,
    2x, "five hundred"; never the digits inside an id, a date or a time."""
    masked = NOT_AMOUNTS.sub(lambda m: " " * len(m.group(0)), text)
    found = []
    for match in AMOUNT.finditer(masked):
        digits, unit = match.group(1), (match.group(2) or "").lower()
        grouped = "," in digits or digits.count(".") > 1  # 1,250,000 or 1.200.000
        plain = digits.replace(",", "").replace(".", "") if grouped else digits
        value = float(plain) * SCALE.get(unit, 1)
        found.append((value, match.start(1), match.end()))
    for match in NUMBER_WORD.finditer(masked):
        value = _words_value(match.group(0))
        overlaps = any(start < match.end() and match.start() < end for _, start, end in found)
        if value is not None and not overlaps:
            found.append((float(value), match.start(), match.end()))
    return sorted(found, key=lambda item: item[1])


def _words_value(phrase: str) -> int | None:
    total, current, seen = 0, 0, False
    words = re.findall(r"[a-z]+", phrase.lower())
    if not any(word in UNITS or word in TENS for word in words):
        return None  # "million" alone scales a figure; it is not one
    for word in words:
        if word in UNITS:
            current += UNITS[word]
        elif word in TENS:
            current += TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in MULTIPLIERS:
            total += max(current, 1) * MULTIPLIERS[word]
            current = 0
        else:
            continue
        seen = True
    return total + current if seen else None


def reason_clause(text: str) -> str | None:
    """The part of the request that says why: "... for the survey", "..., the purchase was returned"."""
    clean = text.strip().rstrip(".!?")
    quoted = QUOTED.search(clean)
    if quoted:
        return quoted.group(1).strip()
    found = REASON.search(clean)
    return found.group(1).strip() if found else None


def named_text(text: str) -> str | None:
    """A name the request gives: quoted, or after "called"/"named"."""
    quoted = QUOTED.search(text)
    if quoted:
        return quoted.group(1).strip()
    found = NAMED.search(text)
    return found.group(1).strip() if found else None


def salient_query(text: str) -> str | None:
    """What to search for: a quoted phrase, an e-mail address, else the request itself."""
    for pattern in (QUOTED, EMAIL):
        found = pattern.search(text)
        if found:
            return (found.group(1) if pattern is QUOTED else found.group(0)).strip()
    stripped = text.strip()
    return stripped[:200] if stripped else None
