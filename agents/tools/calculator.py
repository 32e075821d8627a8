"""Safe arithmetic for the calculate tool: walks a whitelisted AST and must never eval, exec or compile code.

Accepted input, beyond Python's arithmetic (+ - * / // % ** and parentheses):

- `×` and `÷` for * and /, `^` for power, `−` (U+2212) for minus;
- percentages: `15%` is 0.15, `50% of 200` is 100, `200 * 15%` is 30. A `%` is
  a percent sign when it ends the expression or is followed by `)`, `,`, an
  operator or the word `of`; followed by a number, a name or `(` it is modulo
  (`10 % 3` is 1). `200 + 15%` is therefore 200.15, not 230;
- thousands separators: `1,250,000` is 1250000 outside function calls. Inside a
  function's parentheses a comma always separates arguments, so `max(1,250)`
  is 250; write `max(1250, 3)` there;
- functions sqrt, log (natural, or log(x, base)), log10, exp, sin, cos, tan,
  abs, round (1 or 2 arguments), min, max, floor, ceil; constants pi, e, tau.
  Names are case-insensitive.

Numbers are decimal (`12`, `1.5`, `.5`, `1e-3`); `2pi`, `0x1F` and `1_000` are
refused with a message rather than guessed at.

Every limit (length, nesting, number size, exponent) is checked before the
work is done, so no input can make the evaluator run long or use much memory.
"""

from __future__ import annotations

import ast
import math
import operator
import re

MAX_EXPRESSION_LENGTH = 500
MAX_DEPTH = 250  # 500 characters make at most 250 nested nodes ("1+1+...", "-(-(...))"); a recursion guard
MAX_RESULT_DIGITS = 1000
MAX_ROUND_DIGITS = 100
_MAX_INT = 10**MAX_RESULT_DIGITS
_DISPLAY_SIGNIFICANT_DIGITS = 12

_PERCENT = "[...]"  # a percent sign becomes a subscript with Ellipsis: postfix, binds tighter than any operator
_ALLOWED_CHARACTERS = re.compile(r"[0-9A-Za-z\s+\-*/%^().,]*")
_PERCENT_SIGN = re.compile(r"%(?=\s*(?:$|[)+\-*/,]|of\b))", re.IGNORECASE)
_PERCENT_OF = re.compile(re.escape(_PERCENT) + r"\s*of\b", re.IGNORECASE)
_GROUPED_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.]|,\d)")
_CALL_BEFORE = re.compile(r"[A-Za-z_]\w*\s*$")
_NUMBER = re.compile(r"(?<![\w.])(?:\d[\d.]*|\.\d[\d.]*)(?:[eE][+-]?\d+)?")

_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_REFUSED = {  # node -> what the refusal calls it
    ast.Attribute: "Attribute access is",
    ast.Subscript: "Indexing is",
    ast.Lambda: "Lambdas are",
    ast.ListComp: "Comprehensions are",
    ast.SetComp: "Comprehensions are",
    ast.DictComp: "Comprehensions are",
    ast.GeneratorExp: "Comprehensions are",
    ast.Compare: "Comparisons are",
    ast.BoolOp: "and/or are",
    ast.IfExp: "Conditional expressions are",
    ast.NamedExpr: "Assignments are",
    ast.Starred: "Star arguments are",
    ast.JoinedStr: "Strings are",
    ast.List: "Lists are",
    ast.Set: "Sets are",
    ast.Dict: "Dictionaries are",
    ast.Tuple: "Commas outside function arguments are",
}


class CalculationError(ValueError):
    """The expression is not accepted or has no finite real result; the message says why."""


def evaluate(expression: str) -> int | float:
    """The value of `expression`; raises CalculationError for anything else."""
    if not isinstance(expression, str):
        raise CalculationError("The expression must be text.")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(f"The expression is longer than {MAX_EXPRESSION_LENGTH} characters.")
    source = _normalize(expression)
    if not source:
        raise CalculationError("The expression is empty.")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise CalculationError(f"Not a valid arithmetic expression: {expression.strip()!r}.") from None
    return _evaluate(tree.body, depth=0)


def for_display(value: int | float) -> int | float:
    """A result rounded to 12 significant digits; whole floats become ints (0.1+0.2 -> 0.3, sqrt(2)**2 -> 2)."""
    if isinstance(value, int):
        return value
    rounded = float(f"{value:.{_DISPLAY_SIGNIFICANT_DIGITS}g}")
    if rounded.is_integer() and abs(rounded) < 2**53:
        return int(rounded)
    return rounded


def _normalize(expression: str) -> str:
    text = expression.replace("×", "*").replace("÷", "/").replace("−", "-")
    if _ALLOWED_CHARACTERS.fullmatch(text) is None:
        bad = next(ch for ch in text if _ALLOWED_CHARACTERS.fullmatch(ch) is None)
        raise CalculationError(f"Unsupported character {bad!r} in the expression.")
    text = " ".join(text.split()).replace("^", "**")
    text = _PERCENT_SIGN.sub(_PERCENT, text)
    text = _PERCENT_OF.sub(_PERCENT + " *", text)
    _refuse_letters_after_numbers(text)
    return _drop_thousands_separators(text)


def _refuse_letters_after_numbers(text: str) -> None:
    """ "2pi" or "3x" is not a number; saying so here also keeps Python's parser from warning about it."""
    for number in _NUMBER.finditer(text):
        following = text[number.end() : number.end() + 1]
        if following.isalpha() or following == "_":
            word = re.match(r"\w*", text[number.end() :]).group()
            raise CalculationError(f"{number.group()}{word!s} is not a number; write {number.group()} * {word}.")


def _drop_thousands_separators(text: str) -> str:
    """Remove grouping commas (1,250,000) except inside a call's parentheses, where commas separate arguments."""
    out: list[str] = []
    inside_call: list[bool] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "(":
            inside_call.append(_CALL_BEFORE.search("".join(out)) is not None)
        elif char == ")" and inside_call:
            inside_call.pop()
        elif char.isdigit() and not (i and (text[i - 1].isalnum() or text[i - 1] in "._")):
            grouped = _GROUPED_NUMBER.match(text, i)
            if grouped and not (inside_call and inside_call[-1]):
                out.append(grouped.group().replace(",", ""))
                i = grouped.end()
                continue
        out.append(char)
        i += 1
    return "".join(out)


def _evaluate(node: ast.AST, depth: int) -> int | float:
    if depth > MAX_DEPTH:
        raise CalculationError(f"The expression is nested more than {MAX_DEPTH} levels deep.")
    depth += 1
    if isinstance(node, ast.Constant):
        return _checked(_number(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _evaluate(node.left, depth)
        right = _evaluate(node.right, depth)
        return _binary(node.op, left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand, depth))
    if isinstance(node, ast.Subscript) and _is_percent(node):
        return _checked(_evaluate(node.value, depth) / 100)
    if isinstance(node, ast.Name):
        return _constant(node.id)
    if isinstance(node, ast.Call):
        return _call(node, depth)
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        raise CalculationError("Only + - * / // % ** and parentheses are allowed as operators.")
    what = _REFUSED.get(type(node), f"{type(node).__name__} is")
    hint = " (write 1250000 or 1,250,000)" if isinstance(node, ast.Tuple) else ""
    raise CalculationError(f"{what} not allowed in a calculation{hint}.")


def _is_percent(node: ast.Subscript) -> bool:
    return isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis


def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        what = "text" if isinstance(value, str | bytes) else f"{type(value).__name__} values"
        raise CalculationError(f"Only real numbers are allowed in a calculation, not {what}.")
    return value


def _constant(name: str) -> float:
    key = name.lower()
    if key in _CONSTANTS:
        return _CONSTANTS[key]
    if key in _FUNCTIONS:
        raise CalculationError(f"{key} is a function; call it with parentheses, e.g. {key}(2).")
    raise CalculationError(f"Unknown name {name!r}; the constants are pi, e and tau.")


def _binary(op: ast.operator, left: int | float, right: int | float) -> int | float:
    if isinstance(op, ast.Pow):
        _check_power(left, right)
    try:
        result = _BINARY[type(op)](left, right)
    except ZeroDivisionError:
        raise CalculationError("Division by zero.") from None
    except OverflowError:
        raise CalculationError("The result is too large.") from None
    return _checked(result)


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse a power whose result would exceed the size bound, before computing it."""
    if base == 0 and exponent < 0:
        raise CalculationError("Division by zero: 0 cannot be raised to a negative power.")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        # |base| >= 2 gives at least 0.30 digits per unit of exponent; the first test keeps the product a small float.
        if exponent > 4 * MAX_RESULT_DIGITS or exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS:
            raise CalculationError(f"The result would have more than {MAX_RESULT_DIGITS} digits.")


def _checked(value: object) -> int | float:
    if isinstance(value, complex):
        raise CalculationError("The result is not a real number.")
    if isinstance(value, int) and abs(value) >= _MAX_INT:
        raise CalculationError(f"The result would have more than {MAX_RESULT_DIGITS} digits.")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError("The result is too large (or not a number).")
    return value


def _call(node: ast.Call, depth: int) -> int | float:
    if not isinstance(node.func, ast.Name):
        raise CalculationError("Only the listed functions can be called: " + ", ".join(_FUNCTIONS) + ".")
    name = node.func.id.lower()
    if name not in _FUNCTIONS:
        raise CalculationError(f"Unknown function {node.func.id!r}; available: " + ", ".join(_FUNCTIONS) + ".")
    if node.keywords:
        raise CalculationError(f"{name}() takes positional arguments only.")
    function, low, high = _FUNCTIONS[name]
    if not low <= len(node.args) <= high:
        wanted = "1 argument" if high == 1 else f"{low} or {high} arguments" if high == 2 else "1 or more arguments"
        raise CalculationError(f"{name}() takes {wanted}, got {len(node.args)}.")
    args = [_evaluate(arg, depth) for arg in node.args]
    try:
        return _checked(function(*args))
    except CalculationError:
        raise
    except ZeroDivisionError:
        raise CalculationError(f"Division by zero in {name}().") from None
    except OverflowError:
        raise CalculationError(f"The result of {name}() is too large.") from None
    except ValueError:
        shown = ", ".join(str(for_display(arg)) for arg in args)
        raise CalculationError(f"{name}({shown}) is undefined (outside the function's domain).") from None


def _sqrt(x: int | float) -> int | float:
    if isinstance(x, int) and x >= 0:
        root = math.isqrt(x)
        if root * root == x:
            return root
    return math.sqrt(x)


def _log(x: int | float, base: int | float | None = None) -> float:
    if base is None:
        return math.log(x)
    if base == 1:
        raise ValueError("log base 1")
    return math.log(x, base)


def _round(x: int | float, digits: int | float | None = None) -> int | float:
    if digits is None:
        return round(x)
    if not isinstance(digits, int):
        raise CalculationError("round()'s second argument (the number of digits) must be a whole number.")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise CalculationError(f"round() accepts at most {MAX_ROUND_DIGITS} digits either side of the point.")
    return round(x, digits)


def _extreme(pick):
    def choose(*args: int | float) -> int | float:
        return args[0] if len(args) == 1 else pick(args)

    return choose


# name -> (function, fewest arguments, most arguments)
_FUNCTIONS = {
    "sqrt": (_sqrt, 1, 1),
    "log": (_log, 1, 2),
    "log10": (math.log10, 1, 1),
    "exp": (math.exp, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (_extreme(min), 1, 100),
    "max": (_extreme(max), 1, 100),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
}
