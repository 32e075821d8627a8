"""More requests answered with no tool: Vietnamese as often as English, with and without
diacritics, and concepts that sit next to the Loyalty tools (a definition of churn needs no
member lookup). Operators add and edit examples in the admin; the router reads them.
"""

from django.db import migrations

ANSWER_EXAMPLES = [
    "what is customer churn and why does it matter",
    "what does net promoter score measure",
    "how do cashback programs usually make money",
    "what's the difference between a coupon and a voucher in general",
    "give me three ideas to make a newsletter more engaging",
    "what is compound interest",
    "explain the difference between revenue and profit",
    "how does a blockchain work, briefly",
    "what are good practices for writing a survey",
    "who painted the Mona Lisa",
    "chỉ số NPS là gì",
    "tỷ lệ churn nghĩa là gì",
    "doanh thu và lợi nhuận khác nhau thế nào",
    "giải thích lãi kép bằng ví dụ đơn giản",
    "phân khúc khách hàng là gì, cho ví dụ",
    "vì sao các thương hiệu hay làm thẻ thành viên",
    "gợi ý vài ý tưởng quà tặng khách hàng dịp cuối năm",
    "viết giúp mình một đoạn chào mừng khách hàng mới",
    "làm thế nào để viết email xin lỗi khách hàng",
    "ai là tác giả Truyện Kiều",
    "núi cao nhất thế giới là núi nào",
    "quang hợp là gì",
    "nghia cua tu KPI la gi",
    "giai thich giup minh blockchain la gi",
    "cach viet mot bai dang facebook hay",
    "hien tuong nhat thuc xay ra nhu the nao",
    "cảm ơn bạn nhé",
    "ok, mình hiểu rồi",
]


def add_examples(apps, schema_editor):
    IntentExample = apps.get_model("agents", "IntentExample")
    for text in ANSWER_EXAMPLES:
        IntentExample.objects.get_or_create(text=text, defaults={"action": "answer", "domains": []})


def remove_examples(apps, schema_editor):
    apps.get_model("agents", "IntentExample").objects.filter(text__in=ANSWER_EXAMPLES).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0010_default_mood_words")]
    operations = [migrations.RunPython(add_examples, remove_examples)]
