"""The router's seed vocabulary comes from a data file (agents/router/data/vocabulary.json) through
`manage.py load_routing_vocabulary`: it adds what is missing, keeps what operators edited, refuses a bad file whole."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agents.models import ActionWord, IntentExample, MoodWord
from agents.router.vocabulary import DEFAULT_FILE, load_vocabulary

pytestmark = pytest.mark.django_db


def rows() -> tuple[set, set, set]:
    return (
        set(ActionWord.objects.values_list("phrase", "action")),
        set(MoodWord.objects.values_list("phrase", "mood", "position")),
        {
            (text, action, tuple(domains))
            for text, action, domains in IntentExample.objects.values_list("text", "action", "domains")
        },
    )


def test_the_shipped_file_holds_what_the_migrations_seed_and_loading_it_again_adds_nothing():
    migrated = rows()
    assert all(migrated)
    load_vocabulary()
    shipped = rows()
    assert all(before <= after for before, after in zip(migrated, shipped, strict=True))
    loaded = load_vocabulary()
    assert (loaded.action_words, loaded.mood_words, loaded.intent_examples) == (0, 0, 0)
    ActionWord.objects.all().delete()
    MoodWord.objects.all().delete()
    IntentExample.objects.all().delete()
    loaded = load_vocabulary()
    assert (loaded.action_words, loaded.mood_words, loaded.intent_examples) == tuple(len(part) for part in shipped)
    assert rows() == shipped


def test_an_operators_edit_survives_and_new_phrases_are_normalised_like_the_admin_saves_them(tmp_path):
    ActionWord.objects.filter(phrase="remove").update(action="update")
    vocabulary = tmp_path / "more.json"
    vocabulary.write_text(
        json.dumps(
            {
                "action_words": {"delete": ["remove", "  Gạch   BỎ "]},
                "mood_words": [{"phrase": "liệu có", "mood": "question", "position": "start"}],
                "intent_examples": [{"text": "bao  giờ thì  hết hạn điểm?", "action": "answer", "domains": []}],
            },
            ensure_ascii=False,
        )
    )
    out = io.StringIO()
    call_command("load_routing_vocabulary", str(vocabulary), stdout=out)
    assert "1 action words, 1 mood words and 1 intent examples added" in out.getvalue()
    assert ActionWord.objects.get(phrase="remove").action == "update"
    assert ActionWord.objects.get(phrase="gạch bỏ").action == "delete"
    assert MoodWord.objects.filter(phrase="liệu có", position="start", mood="question").exists()
    assert IntentExample.objects.filter(text="bao giờ thì hết hạn điểm?").exists()


@pytest.mark.parametrize(
    "content, names",
    [
        ("{not json", "not JSON"),
        ('{"action_words": {"destroy": ["nuke"]}}', "action_words.destroy: not an action"),
        ('{"action_words": {"delete": ["nuke"]}, "mood_words": [{"phrase": "eh", "mood": "shout"}]}', "mood_words[0]"),
        ('{"intent_examples": [{"text": "hi", "action": "answer", "domains": "loyalty"}]}', "intent_examples[0]"),
        ('{"examples": []}', "nothing else"),
    ],
)
def test_a_bad_file_is_refused_whole_with_the_entry_named(tmp_path, content, names):
    vocabulary = tmp_path / "bad.json"
    vocabulary.write_text(content)
    before = rows()
    with pytest.raises(CommandError, match=names.replace("[", r"\[").replace("]", r"\]")):
        call_command("load_routing_vocabulary", str(vocabulary))
    assert rows() == before


def test_a_missing_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="cannot be read"):
        call_command("load_routing_vocabulary", str(tmp_path / "absent.json"))
    assert DEFAULT_FILE.exists()
