"""Default intent examples: requests answered from general knowledge, with no tool, in English and Vietnamese.

Without them the router has evidence only for tools, and every request would
look like one. Operators add and edit examples in the admin; the router reads them.
"""

from django.db import migrations

ANSWER_EXAMPLES = [
    "explain how a rainbow forms",
    "who wrote Romeo and Juliet",
    "what is the capital of Australia",
    "who discovered penicillin",
    "why is the sky blue",
    "how does a refrigerator keep food cold",
    "what's the difference between a virus and a bacterium",
    "summarize the plot of Hamlet",
    "define inflation in simple words",
    "what is machine learning",
    "what does the acronym NASA mean",
    "how many legs does a spider have",
    "in which year did World War II end",
    "tell me a fun fact about octopuses",
    "write a haiku about autumn",
    "draft a polite email declining a meeting",
    "translate good morning into French",
    "give me tips for a job interview",
    "recommend a classic novel to read",
    "suggest a name for a coffee shop",
    "how do I boil an egg",
    "what is the Pythagorean theorem",
    "is a tomato a fruit or a vegetable",
    "what causes the seasons on Earth",
    "hello, how are you",
    "thanks, that helps",
    "giải thích định luật thứ hai của Newton",
    "ai là người phát minh ra điện thoại",
    "thủ đô của Úc là gì",
    "viết một bài thơ ngắn về mùa thu",
    "cho tôi vài mẹo học tiếng Anh",
    "sự khác nhau giữa virus và vi khuẩn",
    "kể một câu chuyện cười",
    "tại sao lá cây có màu xanh",
    "tóm tắt truyện Tấm Cám",
    "dịch câu 'cảm ơn' sang tiếng Nhật",
    "soạn lời cảm ơn gửi khách hàng",
    "xin chào, bạn khỏe không",
]


def add_examples(apps, schema_editor):
    IntentExample = apps.get_model("agents", "IntentExample")
    for text in ANSWER_EXAMPLES:
        IntentExample.objects.get_or_create(text=text, defaults={"action": "answer", "domains": []})


def remove_examples(apps, schema_editor):
    apps.get_model("agents", "IntentExample").objects.filter(text__in=ANSWER_EXAMPLES).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0007_intent_examples")]
    operations = [migrations.RunPython(add_examples, remove_examples)]
