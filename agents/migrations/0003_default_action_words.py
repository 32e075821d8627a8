"""Default action words (English and Vietnamese). Operators edit them in the admin; the router reads them."""

from django.db import migrations

DEFAULT_ACTION_WORDS = {
    "create": ["create", "add", "new", "make", "set up", "register", "tạo", "thêm", "tạo mới", "lập"],
    "update": ["update", "change", "edit", "modify", "rename", "adjust", "sửa", "cập nhật", "thay đổi", "chỉnh"],
    "delete": ["delete", "remove", "drop", "erase", "xóa", "xoá", "gỡ", "hủy bỏ"],
    "list": ["list", "show all", "which", "what are", "liệt kê", "danh sách", "những", "các"],
    "get": ["get", "show", "details", "detail", "view", "how many", "how much", "xem", "chi tiết", "bao nhiêu"],
    "search": ["search", "find", "look for", "look up", "tìm", "tìm kiếm", "tra"],
    "execute": [
        "run", "start", "stop", "restart", "activate", "deactivate", "pause", "issue", "award", "redeem",
        "transfer", "chạy", "khởi động", "kích hoạt", "tạm dừng", "dừng", "cộng", "trừ", "đổi",
    ],  # fmt: skip
    "answer": [
        "how do i", "how to", "how does", "why", "explain", "what does", "what is a", "what is an",
        "làm sao", "như thế nào", "tại sao", "giải thích", "là gì",
    ],  # fmt: skip
}


def add_words(apps, schema_editor):
    ActionWord = apps.get_model("agents", "ActionWord")
    for action, phrases in DEFAULT_ACTION_WORDS.items():
        for phrase in phrases:
            ActionWord.objects.get_or_create(phrase=phrase, defaults={"action": action})


def remove_words(apps, schema_editor):
    ActionWord = apps.get_model("agents", "ActionWord")
    phrases = [phrase for phrases in DEFAULT_ACTION_WORDS.values() for phrase in phrases]
    ActionWord.objects.filter(phrase__in=phrases).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0002_routing_vocabulary")]
    operations = [migrations.RunPython(add_words, remove_words)]
