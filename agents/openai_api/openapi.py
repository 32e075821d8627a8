"""The OpenAPI 3.1 description of /v1, served at GET /v1/openapi.json: what agents.openai_api.views accepts and answers.

Written by hand beside the checks it describes (agents.openai_api.body_limits, agents.openai_api.views
parse_request, agents.turns.client_tools); the bounds come from the same settings, so
the document says what this deployment enforces. The fuzz test
(tests/agents/openai_api/test_api_fuzz.py) generates requests from it. Describes only; never
validates a request (the checks above do, with clearer messages).
"""

from django.conf import settings

from agents.turns.client_tools import CHOICE_WORDS
from catalog.models.schemas import TOOL_NAME_PATTERN

from . import attribution

ERROR_STATUSES = {
    "400": "The request is invalid: bad JSON, a wrong type, too deep, a NUL byte, too many messages or tools.",
    "401": "No API key, or not a valid one.",
    "403": "The key's owner or scopes may not do this.",
    "404": "No such model (or approval).",
    "405": "The method is not allowed on this path.",
    "413": "The body is over TOOLHUB_API_MAX_BODY_BYTES.",
    "429": "Past the key's or its owner's requests per minute; Retry-After says when to try again.",
    "502": "The model server failed; the turn did not finish.",
    "503": "The server is busy (no database connection in time); Retry-After says when to try again.",
    "504": "The turn or the model did not finish before its deadline.",
}
PRINTABLE = "^[^\\x00-\\x1f\\x7f]*$"  # no control characters (agents/openai_api/attribution.py)
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def errors(*statuses: str) -> dict:
    answers = {}
    for status in statuses:
        answers[status] = {"description": ERROR_STATUSES[status], "content": json_content(ref("ErrorResponse"))}
        if status in ("429", "503"):
            answers[status]["headers"] = RETRY_AFTER
    return answers


def schemas() -> dict:
    text = {"type": "string"}
    nullable_text = {"type": ["string", "null"]}
    tool_call = {
        "type": "object",
        "required": ["id", "function"],
        "properties": {
            "id": text,
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": text, "arguments": {"type": "string", "description": "JSON-encoded."}},
            },
        },
    }
    return {
        "Error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {"message": text, "type": text, "param": nullable_text, "code": nullable_text},
        },
        "ErrorResponse": {"type": "object", "required": ["error"], "properties": {"error": ref("Error")}},
        "TextPart": {
            "type": "object",
            "required": ["type", "text"],
            "properties": {"type": {"const": "text"}, "text": text},
        },
        "ToolCall": tool_call,
        "Message": {
            "type": "object",
            "required": ["role"],
            "properties": {
                "role": {"enum": ["system", "user", "assistant", "tool"]},
                "content": {"anyOf": [text, {"type": "array", "items": ref("TextPart")}, {"type": "null"}]},
                "tool_calls": {"type": "array", "items": ref("ToolCall"), "description": "assistant messages only"},
                "tool_call_id": {**text, "description": "tool messages: the call they answer"},
                "name": text,
            },
        },
        "FunctionTool": {
            "type": "object",
            "required": ["type", "function"],
            "properties": {
                "type": {"const": "function"},
                "function": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "pattern": TOOL_NAME_PATTERN.pattern},
                        "description": text,
                        "parameters": {"type": "object", "description": "A JSON schema of the arguments."},
                        "strict": {"type": "boolean"},
                    },
                },
            },
        },
        "ChatCompletionRequest": {
            "type": "object",
            "required": ["messages"],
            "properties": {
                "model": {"type": ["string", "null"], "description": 'A model of GET /v1/models; default "toolhub".'},
                "messages": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": settings.TOOLHUB_API_MAX_MESSAGES,
                    "items": ref("Message"),
                    "description": "Ends with a non-empty user message, or tool results answering the assistant's "
                    "tool_calls after one.",
                },
                "stream": {"type": ["boolean", "null"], "description": "true: server-sent events ending in [DONE]."},
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "tools": {"type": "array", "maxItems": settings.TOOLHUB_MAX_CLIENT_TOOLS, "items": ref("FunctionTool")},
                "tool_choice": {
                    "anyOf": [
                        {"enum": list(CHOICE_WORDS)},
                        {
                            "type": "object",
                            "required": ["type", "function"],
                            "properties": {
                                "type": {"const": "function"},
                                "function": {"type": "object", "required": ["name"], "properties": {"name": text}},
                            },
                        },
                    ]
                },
                "parallel_tool_calls": {"type": "boolean"},
                "two_stage_analysis": {"type": ["boolean", "null"], "description": "false: skip the steward."},
                "user": {
                    "type": ["string", "null"],
                    "maxLength": attribution.MAX_USER,
                    "pattern": PRINTABLE,
                    "description": "Whom the request is for, kept on the conversation (console search).",
                },
                "metadata": {
                    "type": ["object", "null"],
                    "maxProperties": attribution.MAX_PAIRS,
                    "propertyNames": {"minLength": 1, "maxLength": attribution.MAX_KEY, "pattern": PRINTABLE},
                    "additionalProperties": {
                        "type": "string",
                        "maxLength": attribution.MAX_VALUE,
                        "pattern": PRINTABLE,
                    },
                    "description": "Tags kept on the conversation, searchable in the console as key=value.",
                },  # fmt: skip
            },
        },
        "ChatCompletion": {
            "type": "object",
            "required": ["id", "object", "created", "model", "choices", "usage"],
            "properties": {
                "id": text,
                "object": {"const": "chat.completion"},
                "created": {"type": "integer"},
                "model": text,
                "choices": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["index", "message", "finish_reason"],
                        "properties": {
                            "index": {"type": "integer"},
                            "message": {
                                "type": "object",
                                "required": ["role", "content"],
                                "properties": {
                                    "role": {"const": "assistant"},
                                    "content": nullable_text,
                                    "tool_calls": {"type": "array", "items": ref("ToolCall")},
                                },
                            },
                            "finish_reason": text,
                        },
                    },
                },
                "usage": {
                    "type": "object",
                    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
                    "properties": {
                        name: {"type": "integer"} for name in ("prompt_tokens", "completion_tokens", "total_tokens")
                    },  # fmt: skip
                },
            },
        },
        "Model": {
            "type": "object",
            "required": ["id", "object", "created", "owned_by", "context_window", "upstream_model", "offline"],
            "properties": {
                "id": text,
                "object": {"const": "model"},
                "created": {"type": "integer"},
                "owned_by": text,
                "context_window": {"type": "integer", "description": "The profile's token budget."},
                "max_output_tokens": {"type": "integer"},
                "upstream_model": {**text, "description": "The model this profile calls."},
                "offline": {"type": "boolean", "description": "True for the builtin offline (rule-based) model."},
            },
        },
        "ModelList": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": ref("Model")}},
        },
        "ApprovalDecision": {
            "type": "object",
            "required": ["approve"],
            "properties": {"approve": {"type": "boolean"}},
        },
        "Approval": {
            "type": "object",
            "required": ["id", "status", "tool_name"],
            "properties": {"id": {"type": "integer"}, "status": text, "tool_name": text},
        },
    }


def openapi_document() -> dict:
    chat = {
        "operationId": "createChatCompletion",
        "summary": "Run a turn: the whole answer as JSON, or (stream: true) its chunks as server-sent events.",
        "requestBody": {"required": True, "content": json_content(ref("ChatCompletionRequest"))},
        "responses": {
            "200": {
                "description": "The answer; a failed turn's error arrives as an error frame before [DONE] once a "
                "stream has started.",
                "content": {
                    **json_content(ref("ChatCompletion")),
                    "text/event-stream": {
                        "schema": {"type": "string"},
                        "description": "`data: {chat.completion.chunk}` lines (and toolhub's status chunks), an "
                        '`data: {"error": ...}` frame if the turn fails, then `data: [DONE]`.',
                    },
                },
            },
            **errors("400", "401", "403", "404", "405", "413", "429", "502", "503", "504"),
        },
    }
    model_id = {"name": "model_id", "in": "path", "required": True, "schema": {"type": "string"}}
    approval_id = {"name": "approval_id", "in": "path", "required": True, "schema": {"type": "integer"}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "toolhub",
            "version": "1.0",
            "description": "OpenAI-compatible chat completions over toolhub's policy-filtered tool catalog. Every "
            "error is an OpenAI-style error object.",
        },
        "servers": [{"url": "/"}],
        "security": [{"apiKey": []}],
        "paths": {
            "/v1/chat/completions": {"post": chat},
            "/v1/models": {
                "get": {
                    "operationId": "listModels",
                    "summary": "The models a request may name.",
                    "responses": {
                        "200": {"description": "The models.", "content": json_content(ref("ModelList"))},
                        **errors("401", "403", "429", "503"),
                    },
                }
            },
            "/v1/models/{model_id}": {
                "get": {
                    "operationId": "retrieveModel",
                    "summary": "One model.",
                    "parameters": [model_id],
                    "responses": {
                        "200": {"description": "The model.", "content": json_content(ref("Model"))},
                        **errors("401", "403", "404", "429", "503"),
                    },
                }
            },
            "/v1/approvals/{approval_id}": {
                "post": {
                    "operationId": "decideApproval",
                    "summary": "Approve or deny a tool call waiting for a decision.",
                    "description": "At a four-eyes risk level (TOOLHUB_FOUR_EYES_RISKS) a key of the user who started "
                    "the turn may deny the call but not approve it: 403 with code four_eyes.",
                    "parameters": [approval_id],
                    "requestBody": {"required": True, "content": json_content(ref("ApprovalDecision"))},
                    "responses": {
                        "200": {"description": "The decided approval.", "content": json_content(ref("Approval"))},
                        "409": {
                            "description": "Already decided or expired.",
                            "content": json_content(ref("ErrorResponse")),
                        },  # fmt: skip
                        **errors("400", "401", "403", "404", "405", "413", "429", "503"),
                    },
                }
            },
            "/v1/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document.",
                    "security": [],
                    "responses": {"200": {"description": "OpenAPI 3.1.", "content": json_content({"type": "object"})}},
                }
            },
        },
        "components": {
            "schemas": schemas(),
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer", "description": "th_<prefix>_<secret>"}},
        },
    }
