"""The phrase lists: one weak signal of the router among the others (fusion.py weighs it).

Every word comes from data: ActionWord rows (verbs in any language), Domain
names and aliases, the aliases of active tool policies, and MoodWord rows (the
cues of a question and of a request for an action). An operator adds a
word in the admin and the lexicon knows it; there is no word list in this
module. Matching is whole words on normalised text, never substrings of tool
names. It decides nothing on its own: a phrase only votes.
"""

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agents.models import ActionWord, MoodWord
from catalog.models import Action, Domain, Operation, ToolPolicy
from catalog.search.index import STOPWORDS
from catalog.search.service import catalog_state

# An action phrase that starts within the first LEAD_WORDS words leads the request ("please list ...").
LEAD_WORDS = 3
# What a tool's operation says about the action of a request that names it.
# Keyed by Operation, read with the operation strings of policies (an Operation is a str).
ACTION_OF_OPERATION: dict[str, Action] = {
    Operation.READ: Action.GET,
    Operation.LIST: Action.LIST,
    Operation.SEARCH: Action.SEARCH,
    Operation.CREATE: Action.CREATE,
    Operation.UPDATE: Action.UPDATE,
    Operation.DELETE: Action.DELETE,
    Operation.EXECUTE: Action.EXECUTE,
}
READ_ACTIONS = frozenset({Action.ANSWER, Action.GET, Action.LIST, Action.SEARCH})
# What a tool alias stands for: (tool name, action, domains).
ToolWord = tuple[str, str, tuple[str, ...]]
_Value = TypeVar("_Value")


@dataclass(frozen=True)
class Hits:
    """What the text matched: phrases per action, per domain, and tool aliases."""

    actions: Counter[str] = field(default_factory=Counter)
    domains: Counter[str] = field(default_factory=Counter)
    tools: tuple[str, ...] = ()
    first_action_at: dict[str, int] = field(default_factory=dict)
    lead_action: str = ""  # the action of a phrase among the first LEAD_WORDS words: "liệt kê ...", "create ..."
    question: bool = False  # a question cue (MoodWord): "bao nhiêu", "do we have", a final "?"
    request: bool = False  # a request cue: "can you", "giúp", "được không"
    names_object: bool = True  # some word besides action phrases, pronouns and fillers: "delete it" names none

    @property
    def reads_only(self) -> bool:
        """The request wants to read, never to write: it opens with a read verb ("liệt kê các
        chiến dịch đang tạm dừng"), or it is a question that asks for no action."""
        if self.lead_action:
            return self.lead_action in READ_ACTIONS
        return self.question and not self.request


def without_diacritics(text: str) -> str:
    """The text as people type it without a Vietnamese keyboard: "tạm dừng" -> "tam dung"."""
    text = unicodedata.normalize("NFD", text.replace("đ", "d").replace("Đ", "D"))
    return unicodedata.normalize("NFC", "".join(ch for ch in text if not unicodedata.combining(ch)))


def is_plain(text: str) -> bool:
    """True for a text with no diacritics (English, or Vietnamese typed without its marks)."""
    return without_diacritics(text) == text


def _with_plain_forms(words: dict[str, _Value]) -> dict[str, _Value]:
    """The phrases, plus each phrase of two or more words that has diacritics as typed without
    them ("tạm dừng" -> "tam dung"); one-word forms are left out ("thêm" -> "them", "các" -> "cac")."""
    plain: dict[str, _Value] = {}
    for phrase, value in words.items():
        form = without_diacritics(phrase)
        if form != phrase and len(form.split()) >= 2 and form not in words:
            plain.setdefault(form, value)
    return words | plain


# Closed-class words that point at something without naming it, and fillers, in English and Vietnamese (without
# diacritics: compared that way). A request of action phrases and these alone ("delete it", "xóa nó đi") names no
# object: whatever it would change is not in the request.
POINTING_WORDS = frozenset(
    without_diacritics(word)
    for word in (
        "it its this that these those them they one ones thing things stuff all everything something anything "
        "please now right away just again too also already go ahead for me us do done "
        "nó cái con đó này kia ấy đấy luôn đi nhé nha giúp giùm hộ tôi mình em anh chị ạ hết những các của "
        "đi thôi vậy rồi ngay bây giờ lại nữa với cho đã"
    ).split()
)


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFC", text).lower()
    text = re.sub(r"[^\w'%]+", " ", text)
    return " ".join(text.split())


def mood_form(text: str) -> str:
    """Lower case, words and question marks as tokens: the form mood cues are matched in."""
    text = unicodedata.normalize("NFC", text).lower().replace("?", " ? ")
    return " ".join(re.sub(r"[^\w'%?]+", " ", text).split())


class MoodCues:
    """Compiled MoodWord rows of one mood: a phrase anywhere, first or last in the request."""

    def __init__(self, rows: list[tuple[str, str]]):
        by_position = defaultdict(set)
        for phrase, position in rows:
            if mood_form(phrase):
                by_position[position].add(re.escape(mood_form(phrase)))

        def compile_(position: str, template: str) -> re.Pattern[str] | None:
            phrases = sorted(by_position.get(position, ()), key=lambda p: (-len(p), p))
            return re.compile(template.format("|".join(phrases))) if phrases else None

        self.patterns = [
            pattern
            for pattern in (
                compile_(MoodWord.Position.ANYWHERE, r"(?<!\S)(?:{})(?!\S)"),
                compile_(MoodWord.Position.START, r"^(?:{})(?!\S)"),
                compile_(MoodWord.Position.END, r"(?<!\S)(?:{})$"),
            )
            if pattern is not None
        ]

    def found_in(self, form: str) -> bool:
        return any(pattern.search(form) for pattern in self.patterns)


def _pattern(phrases: Iterable[str]) -> re.Pattern[str] | None:
    ordered = sorted({normalize(p) for p in phrases if normalize(p)}, key=lambda p: (-len(p), p))
    if not ordered:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in ordered) + r")(?!\w)")


class Lexicon:
    """The phrase lists, compiled once per catalog state."""

    def __init__(
        self,
        action_words: dict[str, str],
        domain_words: dict[str, set[str]],
        tool_words: dict[str, list[ToolWord]],
        mood_words: Sequence[tuple[str, str, str]] = (),
    ):
        # mood_words: (phrase, mood, position) rows
        self.question_cues = MoodCues([(p, pos) for p, mood, pos in mood_words if mood == MoodWord.Mood.QUESTION])
        self.request_cues = MoodCues([(p, pos) for p, mood, pos in mood_words if mood == MoodWord.Mood.REQUEST])
        self.action_words = _with_plain_forms({normalize(k): v for k, v in action_words.items()})
        self.domain_words = _with_plain_forms({normalize(k): v for k, v in domain_words.items()})
        # phrase -> list of (tool name, action, domains)
        self.tool_words = _with_plain_forms({normalize(k): v for k, v in tool_words.items()})
        self.action_pattern = _pattern(self.action_words)
        self.domain_pattern = _pattern(self.domain_words)
        self.tool_pattern = _pattern(self.tool_words)

    def match(self, text: str) -> Hits:
        normalized = normalize(text)
        actions: Counter[str] = Counter()
        domains: Counter[str] = Counter()
        first_action_at: dict[str, int] = {}
        tools: list[str] = []
        lead_action = ""
        if self.action_pattern:
            for found in self.action_pattern.finditer(normalized):
                action = self.action_words[found.group(0)]
                actions[action] += len(found.group(0).split())
                first_action_at.setdefault(action, found.start())
                if not lead_action and normalized[: found.start()].count(" ") < LEAD_WORDS:
                    lead_action = action
        if self.domain_pattern:
            for found in self.domain_pattern.finditer(normalized):
                for domain in self.domain_words[found.group(0)]:
                    domains[domain] += 1
        if self.tool_pattern:
            for found in self.tool_pattern.finditer(normalized):
                for name, action, tool_domains in self.tool_words[found.group(0)]:
                    tools.append(name)
                    # A tool's alias says what it does: a weak vote for that action.
                    actions[action] += 1
                    first_action_at.setdefault(action, found.start())
                    for domain in tool_domains:
                        domains[domain] += 1
        form = mood_form(text)
        rest = self.action_pattern.sub(" ", normalized) if self.action_pattern else normalized
        # A tool's alias that is itself an action phrase ("hủy", "cancel") names no object either.
        names_object = any(
            word not in STOPWORDS and without_diacritics(word) not in POINTING_WORDS for word in rest.split()
        )
        return Hits(
            actions,
            domains,
            tuple(dict.fromkeys(tools)),
            first_action_at,
            lead_action=lead_action,
            question=self.question_cues.found_in(form),
            request=self.request_cues.found_in(form),
            names_object=names_object,
        )


def load_lexicon() -> "Lexicon":
    action_words = dict(ActionWord.objects.values_list("phrase", "action"))
    domain_words: dict[str, set[str]] = defaultdict(set)
    for domain in Domain.objects.all():
        for phrase in [domain.name, domain.title, *domain.aliases]:
            domain_words[phrase].add(domain.name)
    tool_words: dict[str, list[ToolWord]] = defaultdict(list)
    policies = (
        ToolPolicy.objects.filter(status=ToolPolicy.Status.ACTIVE, tool__enabled=True)
        .select_related("tool")
        .prefetch_related("domains")
    )
    for policy in policies:
        domains = tuple(sorted(domain.name for domain in policy.domains.all()))
        for alias in policy.aliases:
            tool_words[alias].append((policy.tool.name, ACTION_OF_OPERATION[policy.operation], domains))
    mood_words = list(MoodWord.objects.values_list("phrase", "mood", "position"))
    return Lexicon(action_words, domain_words, tool_words, mood_words)


_current: tuple[tuple[int, str], "Lexicon"] | None = None


def lexicon() -> "Lexicon":
    """The process's lexicon, rebuilt when the catalog state moves (ActionWord changes move it too)."""
    global _current
    state = catalog_state()
    cached = _current
    if cached is None or cached[0] != state:
        cached = (state, load_lexicon())
        _current = cached
    return cached[1]
