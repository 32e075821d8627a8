"""The router's seed vocabulary from a data file: action words, mood words and intent examples.

New seed vocabulary goes into a file (data/vocabulary.json ships the default set) and reaches a database through
`manage.py load_routing_vocabulary` (`load_demo_catalog` loads it too); never through a new data migration. Loading adds
what is missing and never changes a row that exists: an operator's edit of a phrase's action or an example's
domains wins over the file. The file's shape:

    {"action_words": {"<action>": ["phrase", ...]},
     "mood_words": [{"phrase": ..., "mood": "question" | "request", "position": "anywhere" | "start" | "end"}],
     "intent_examples": [{"text": ..., "action": "<action>", "domains": ["<domain>", ...]}]}
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from django.db import transaction

from agents.models import ActionWord, IntentExample, MoodWord
from catalog.models import Action

DEFAULT_FILE = Path(__file__).with_name("data") / "vocabulary.json"
SECTIONS = ("action_words", "mood_words", "intent_examples")


class VocabularyError(ValueError):
    """The file cannot be read as routing vocabulary; the message names the file and the entry."""


@dataclass(frozen=True)
class Loaded:
    action_words: int
    mood_words: int
    intent_examples: int

    def __str__(self) -> str:
        return (
            f"{self.action_words} action words, {self.mood_words} mood words and "
            f"{self.intent_examples} intent examples added"
        )


def read_vocabulary(path: Path) -> dict[str, Any]:
    """The file's vocabulary, checked whole before anything is written."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise VocabularyError(f"{path}: cannot be read ({error.strerror or error})") from error
    except json.JSONDecodeError as error:
        raise VocabularyError(f"{path}: not JSON ({error})") from error
    if not isinstance(data, dict) or not set(data) <= set(SECTIONS):
        raise VocabularyError(f"{path}: an object with some of {', '.join(SECTIONS)} and nothing else")
    actions, moods, positions = set(Action.values), set(MoodWord.Mood.values), set(MoodWord.Position.values)

    def fail(where: str, what: str) -> NoReturn:
        raise VocabularyError(f"{path}: {where}: {what}")

    words = data.get("action_words", {})
    if not isinstance(words, dict):
        fail("action_words", "an object of action -> list of phrases")
    for action, phrases in words.items():
        if action not in actions:
            fail(f"action_words.{action}", f"not an action (one of {', '.join(sorted(actions))})")
        if not isinstance(phrases, list) or not all(isinstance(p, str) and p.strip() for p in phrases):
            fail(f"action_words.{action}", "a list of non-empty phrases")
    for index, row in enumerate(data.get("mood_words", [])):
        if not isinstance(row, dict) or not isinstance(row.get("phrase"), str) or not row["phrase"].strip():
            fail(f"mood_words[{index}]", "an object with a non-empty phrase")
        if row.get("mood") not in moods:
            fail(f"mood_words[{index}]", f"mood is one of {', '.join(sorted(moods))}")
        if row.get("position", MoodWord.Position.ANYWHERE) not in positions:
            fail(f"mood_words[{index}]", f"position is one of {', '.join(sorted(positions))}")
    for index, row in enumerate(data.get("intent_examples", [])):
        if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
            fail(f"intent_examples[{index}]", "an object with a non-empty text")
        if len(" ".join(row["text"].split())) > IntentExample.MAX_TEXT_CHARS:
            fail(f"intent_examples[{index}]", f"text longer than {IntentExample.MAX_TEXT_CHARS} characters")
        if row.get("action") not in actions:
            fail(f"intent_examples[{index}]", f"action is one of {', '.join(sorted(actions))}")
        domains = row.get("domains", [])
        if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
            fail(f"intent_examples[{index}]", "domains is a list of domain names")
    return data


def load_vocabulary(path: Path = DEFAULT_FILE) -> Loaded:
    """Add the file's rows that the database lacks, in one transaction; existing rows are left as they are."""
    data = read_vocabulary(path)
    added = {section: 0 for section in SECTIONS}
    with transaction.atomic():
        for action, phrases in data.get("action_words", {}).items():
            for phrase in phrases:
                phrase = " ".join(phrase.lower().split())
                added["action_words"] += ActionWord.objects.get_or_create(phrase=phrase, defaults={"action": action})[1]
        for row in data.get("mood_words", []):
            phrase = " ".join(row["phrase"].lower().split())
            position = row.get("position", MoodWord.Position.ANYWHERE)
            created = MoodWord.objects.get_or_create(phrase=phrase, position=position, defaults={"mood": row["mood"]})
            added["mood_words"] += created[1]
        for row in data.get("intent_examples", []):
            text = " ".join(row["text"].split())
            defaults = {"action": row["action"], "domains": row.get("domains", [])}
            added["intent_examples"] += IntentExample.objects.get_or_create(text=text, defaults=defaults)[1]
    return Loaded(**added)
