"""Frozen, slotted value classes, declared as dataclasses are, without the ``dataclasses`` module.

``@frozen`` on a class with annotated fields gives what
``@dataclass(frozen=True, slots=True)`` gives: ``__init__`` (fields in order,
defaults, ``field(default_factory=...)``, ``field(init=False, default=...)``,
``__post_init__``), ``__repr__``, ``__eq__``, ``__hash__``, ``__slots__``,
``__match_args__``, and assignment refused with :class:`FrozenInstanceError`.
:func:`replace` is ``dataclasses.replace``.  mypy reads it as a frozen
dataclass (PEP 681, ``dataclass_transform``).

Why not ``dataclasses``: it imports ``inspect`` (and with it ``ast``, ``dis``
and ``tokenize``), about 10 ms, and writes each method of each class with
``exec``; ``say``, ``send`` and ``status`` start on every message and paid
for it more than for their own work (docs/benchmarks.md).  Here only
``__init__`` is written with ``exec`` (so constructing stays as fast), and
only when the class's first value is made; the other methods are shared
functions reading the field names from the class.
Inheriting fields from another value class is not supported (nothing needs it).
"""

from __future__ import annotations

from operator import attrgetter

from fabrikito import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_kwargs: object) -> object:
        return lambda decorated: decorated


class FrozenInstanceError(AttributeError):
    """A field of a frozen value was assigned or deleted."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class _Field:
    __slots__ = ("default", "factory", "init")

    def __init__(self, default: object, factory: Callable[[], object] | None, init: bool) -> None:
        self.default = default
        self.factory = factory
        self.init = init


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, init: bool = True) -> Any:
    """A field's default made anew for each value (``default_factory``), or a field
    ``__init__`` does not take (``init=False``: its ``default``, or what
    ``__post_init__`` sets)."""
    return _Field(default, default_factory, init)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, slotted value class (see the module docstring)."""
    own = cls.__dict__
    names: list[str] = []
    params: list[str] = []
    body: list[str] = []
    env: dict[str, object] = {"_set": object.__setattr__, "_MISSING": _MISSING}
    for name, annotation in own.get("__annotations__", {}).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        names.append(name)
        spec = own.get(name, _MISSING)
        if not isinstance(spec, _Field):
            spec = _Field(spec, None, True)
        if spec.factory is not None:
            env[f"_f_{name}"] = spec.factory
            params.append(f"{name}=_MISSING")
            body.append(f"_set(self, {name!r}, _f_{name}() if {name} is _MISSING else {name})")
            continue
        if spec.default is not _MISSING:
            env[f"_d_{name}"] = spec.default
        if not spec.init:
            if spec.default is not _MISSING:
                body.append(f"_set(self, {name!r}, _d_{name})")
            continue
        params.append(name if spec.default is _MISSING else f"{name}=_d_{name}")
        body.append(f"_set(self, {name!r}, {name})")
    if "__post_init__" in own:
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"])
    made_box: list[type] = []
    namespace = {key: item for key, item in own.items() if key not in names and key not in ("__dict__", "__weakref__")}
    fields = tuple(names)
    init_names = tuple(param.partition("=")[0] for param in params)
    namespace.update(
        __slots__=fields,
        __init__=_first_init(source, env, f"{cls.__qualname__}.__init__", made_box),
        __setattr__=_refuse_set,
        __delattr__=_refuse_delete,
        __match_args__=init_names,
        __fields__=fields,
        __fields_get__=attrgetter(*fields) if fields else staticmethod(_no_fields),
        __init_names__=init_names,
    )
    for method, shared in (("__repr__", _repr), ("__eq__", _eq), ("__hash__", _hash)):
        if method not in own:  # one the class writes itself stays, as with dataclasses
            namespace[method] = shared
    made: type[T] = type.__new__(type(cls), cls.__name__, cls.__bases__, namespace)
    made_box.append(made)
    return made


def _first_init(source: str, env: dict[str, object], qualname: str, made: list[type]) -> Callable[..., None]:
    """The class's ``__init__`` until its first value is made: it writes the real one (``exec``, about
    0.1 ms a class), puts it on the class and runs it.  A command imports many value classes and makes
    values of a few: the others never pay for theirs."""

    def first(self: Any, *args: Any, **kwargs: Any) -> None:
        exec(source, env)  # noqa: S102 -- what dataclasses does, once per class, with field names only
        init: Any = env["__init__"]
        init.__qualname__ = qualname
        setattr(made[0], "__init__", init)  # noqa: B010 -- the class's own attribute, replaced once
        init(self, *args, **kwargs)

    first.__qualname__ = qualname
    return first


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the value ``obj`` with ``changes`` (as ``dataclasses.replace``)."""
    cls = type(obj)
    for name in cls.__init_names__:  # type: ignore[attr-defined]
        if name not in changes:
            changes[name] = getattr(obj, name)
    return cls(**changes)


def _no_fields(_obj: object) -> tuple[()]:
    return ()


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__fields__)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: Any) -> bool:
    if other is self:
        return True
    if other.__class__ is not self.__class__:
        return NotImplemented  # type: ignore[no-any-return]
    return bool(self.__fields_get__(self) == self.__fields_get__(other))


def _hash(self: Any) -> int:
    return hash(self.__fields_get__(self))


def _refuse_set(self: Any, name: str, _value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")
