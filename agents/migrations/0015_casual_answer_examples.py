"""Requests answered with no tool, worded close to the Loyalty tools on purpose: definitions,
differences between concepts, advice, writing help that quotes points and vouchers, translation,
greetings. English and Vietnamese (a third without diacritics). Written by someone who saw
neither the routing cases nor the evaluation sets. Operators edit examples in the admin.
"""

from django.db import migrations

ANSWER_EXAMPLES = [
    # English (30)
    "explain breakage in a points program",
    "what's the difference between earn rate and burn rate",
    "what does a tier qualification period mean",
    "how do companies usually account for unredeemed points as a liability",
    "cashback versus points program: which is better for a small retailer",
    "suggest five names for a coffee chain's loyalty program",
    "brainstorm reward ideas for young parents",
    "rewrite this SMS to sound friendlier: 'Your 500 points expire on 30/6. Use them now.'",
    "translate 'Members earn double points every weekend' into Vietnamese",
    "proofread this: 'Dear member, you voucher is expire soon, please used it.'",
    "what is a coalition loyalty program",
    "why do companies make points expire",
    "what are the pros and cons of paid membership tiers",
    "how's it going today",
    "good morning!",
    "thanks a lot, that was really helpful",
    "what is customer lifetime value",
    "difference between a customer segment and a persona",
    "write a short tagline for a birthday voucher campaign",
    "what are common ways loyalty programs get abused, in general",
    "who was the first person to walk on the moon",
    "what is the boiling point of water at sea level",
    "which river is the longest in Africa",
    "when was the Eiffel Tower built",
    "what is gamification in marketing",
    "draft a push notification announcing a new Gold tier, under 20 words",
    "explain RFM analysis in simple terms",
    "how does a referral program usually work",
    "see you tomorrow, bye",
    "what's the chemical symbol for gold",
    # Vietnamese with diacritics (20)
    "tier là gì trong chương trình khách hàng thân thiết",
    "breakage trong loyalty nghĩa là gì",
    "điểm thưởng và cashback khác nhau ra sao",
    "voucher và coupon khác nhau như thế nào",
    "gợi ý tên cho chương trình thành viên của chuỗi trà sữa",
    "cho mình vài ý tưởng quà đổi điểm cho dân văn phòng",
    "viết lại tin nhắn này cho lịch sự hơn: 'Điểm của bạn sắp hết hạn, đổi ngay!'",
    "dịch sang tiếng Anh giúp mình: 'Thành viên hạng Vàng được miễn phí giao hàng'",
    "chào buổi sáng",
    "hôm nay bạn thế nào",
    "cảm ơn nhiều nha, giúp ích lắm",
    "tại sao nên đặt hạn sử dụng cho điểm thưởng",
    "cách thiết kế các bậc hạng thành viên cho hợp lý",
    "một chiến dịch tích điểm nên kéo dài bao lâu thì hợp lý",
    "Hà Nội được chọn làm kinh đô vào năm nào",
    "chiến dịch Điện Biên Phủ kết thúc năm nào",
    "tại sao nước biển lại mặn",
    "viết giúp email thông báo cho member về chương trình đổi quà Tết",
    "giá trị vòng đời khách hàng là gì",
    "thế nào là khách hàng ngủ đông",
    # Vietnamese without diacritics (10)
    "diem thuong la gi, giai thich don gian giup minh",
    "segment va tier khac nhau cho nao",
    "goi y ten cho hang thanh vien cao nhat",
    "viet lai sms nay cho hay hon: 'Ban vua nhan 200 diem, kiem tra app nhe'",
    "dich 'voucher het han' sang tieng Anh",
    "chao ban, hom nay the nao",
    "cam on nhe, ok roi",
    "thu do cua Nhat Ban la gi",
    "tai sao trai dat co ngay va dem",
    "co nen cho diem het han sau 12 thang khong, tu van giup",
]


def add_examples(apps, schema_editor):
    IntentExample = apps.get_model("agents", "IntentExample")
    for text in ANSWER_EXAMPLES:
        IntentExample.objects.get_or_create(text=text, defaults={"action": "answer", "domains": []})


def remove_examples(apps, schema_editor):
    apps.get_model("agents", "IntentExample").objects.filter(text__in=ANSWER_EXAMPLES).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0014_turn_client_tools")]
    operations = [migrations.RunPython(add_examples, remove_examples)]
