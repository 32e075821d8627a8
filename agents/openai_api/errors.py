"""The API's errors, as OpenAI shapes them: {"error": {"message", "type", "param", "code"}} with an HTTP status.

Also what a failed turn answers: each FailureReason of its error event has its own status and code.
Plain values only; never renders a failure as an answer.
"""

from django.http import JsonResponse

from agents.turns.client_tools import ClientToolError
from agents.turns.events import FailureReason
from toolhub.rate_limits import Exceeded


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None,
                 headers: dict | None = None):  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JsonResponse:
        return JsonResponse(self.body(), status=self.status, headers=self.headers)

    @classmethod
    def method_not_allowed(cls, message: str, *, allow: tuple[str, ...]) -> "ApiError":
        """405 with the methods the path takes in Allow (RFC 9110 §15.5.6 requires it on every 405)."""
        return cls(405, message, code="method_not_allowed", headers={"Allow": ", ".join(allow)})

    @classmethod
    def rate_limited(cls, exceeded: Exceeded) -> "ApiError":
        return cls(429, exceeded.message, type="rate_limit_error", code="rate_limit_exceeded", headers=exceeded.headers)

    @classmethod
    def of(cls, problem: ClientToolError) -> "ApiError":
        return cls(400, problem.message, param=problem.param, code=problem.code)


# A 503 (the service is there, a part it needs is not) says when to try again.
RETRY_AFTER_SECONDS = 5

# A failed turn's FailureReason -> (HTTP status, error type, code, message). Model errors name no upstream URL.
FAILURES = {
    FailureReason.MODEL_UNAVAILABLE: (502, "api_error", "model_unavailable",
                                      "The model server could not be reached or failed; the turn did not finish."),
    FailureReason.MODEL_TIMEOUT: (504, "api_error", "model_timeout",
                                  "The model server did not answer before its deadline (TOOLHUB_MODEL_TIMEOUT)."),
    FailureReason.TURN_TIMEOUT: (504, "api_error", "turn_timeout", "The turn did not finish in time."),
    FailureReason.WORKER_LOST: (503, "api_error", "worker_lost",
                                "The worker running the turn stopped after the answer had begun; send it again."),
    FailureReason.CONTEXT_LENGTH_EXCEEDED: (400, "invalid_request_error", "context_length_exceeded",
                                            "The conversation outgrew the model's context window during the turn."),
    FailureReason.CANCELLED: (409, "api_error", "turn_cancelled", "An operator cancelled the turn before it finished."),
    FailureReason.BROKER_UNAVAILABLE: (503, "api_error", "broker_unavailable",
                                       "The task queue could not take the turn; send the request again shortly."),
    FailureReason.INTERNAL: (500, "server_error", "internal_error", "The turn failed inside toolhub."),
}  # fmt: skip


def failure_error(payload: dict) -> ApiError:
    """The API's error for a turn's error event."""
    status, kind, code, message = FAILURES.get(payload.get("reason"), FAILURES[FailureReason.INTERNAL])
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
    return ApiError(status, message, type=kind, code=code, headers=headers)
