"""Example requests the empty console offers a first-time operator: each works on the demo catalog with the
builtin offline model (its ids are the demo's: demo/loyalty_mcp/seed.py). Plain data; never reads the database."""

from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True)
class ExampleRequest:
    text: str
    lang: str  # BCP 47, for the link's lang attribute (a screen reader reads Vietnamese as Vietnamese)
    tool: str  # the tool the builtin model calls for it on the demo catalog

    @property
    def query(self) -> str:
        """The query string that pre-fills the console's message box with it (works without JavaScript)."""
        return urlencode({"message": self.text})


EXAMPLE_REQUESTS = (
    ExampleRequest("What is the points balance of member mem_lan00001?", "en", "get_member_balance"),
    ExampleRequest("Calculate 1250 * 12 + 300", "en", "calculate"),
    ExampleRequest("What time is it in Hanoi?", "en", "get_current_time"),
    ExampleRequest("List active campaigns", "en", "list_campaigns"),
    ExampleRequest("Hội viên mem_minh0001 còn bao nhiêu điểm?", "vi", "get_member_balance"),
    ExampleRequest("Hôm nay là ngày mấy?", "vi", "get_current_date"),
    ExampleRequest("Liệt kê các chiến dịch khách hàng thân thiết đang hoạt động", "vi", "list_campaigns"),
)
