"""Default question and request cues (English and Vietnamese, with and without diacritics).

Operators edit them in the admin; the router reads them (agents/router/lexicon.py).
"""

from django.db import migrations

QUESTION = {
    "anywhere": [
        "how many", "how much", "what", "what's", "which", "who", "whose", "when", "where", "whether",
        "is there", "are there", "do we have", "do i have", "any chance",
        "bao nhiêu", "bao nhieu", "mấy", "nào", "gì", "ra sao", "thế nào", "the nao", "như nào", "nhu nao",
        "đâu", "có phải", "co phai", "hay không", "hay khong", "hay chưa", "hay chua", "chưa nhỉ", "không nhỉ",
    ],
    "start": ["is", "are", "was", "were", "do", "does", "did", "has", "have", "had"],
    "end": ["?", "không", "khong", "ko", "chưa", "chua", "hả", "à", "vậy", "vay", "nhỉ", "nhi", "sao"],
}  # fmt: skip
REQUEST = {
    "anywhere": [
        "can you", "could you", "would you", "will you", "can u", "could u", "please", "pls", "plz",
        "i want to", "i'd like to", "i need to", "let's", "go ahead",
        "giúp", "giup", "giùm", "gium", "hộ", "dùm", "dum", "hãy", "được không", "duoc khong", "đc không",
        "dc ko", "dc khong", "có thể", "co the", "cho mình", "cho minh", "cho tôi", "cho toi", "cho em",
        "làm ơn", "lam on", "muốn", "muon", "nhé", "nhe", "nha",
    ],
    "start": ["can i", "could i", "can we", "could we", "may i"],
    "end": ["đi", "di"],
}  # fmt: skip


def rows():
    for mood, by_position in (("question", QUESTION), ("request", REQUEST)):
        for position, phrases in by_position.items():
            for phrase in phrases:
                yield phrase, mood, position


def add_words(apps, schema_editor):
    MoodWord = apps.get_model("agents", "MoodWord")
    for phrase, mood, position in rows():
        MoodWord.objects.get_or_create(phrase=phrase, position=position, defaults={"mood": mood})


def remove_words(apps, schema_editor):
    MoodWord = apps.get_model("agents", "MoodWord")
    for phrase, mood, position in rows():
        MoodWord.objects.filter(phrase=phrase, position=position, mood=mood).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0009_mood_words")]
    operations = [migrations.RunPython(add_words, remove_words)]
