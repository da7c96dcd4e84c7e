"""Storm's ``ITuple`` typed getters (``getString(i)``, ``getIntegerByField(name)``, ...), so that
ported code reads as it did. A Python value has one type whatever the getter's name, so each
returns the value as it is (Storm's cast is the caller's business here); `Tuple` and
`TridentTuple` take them from `TypedGetters`."""

from __future__ import annotations

from typing import Any


class TypedGetters:
    """``get_<type>(i)`` and ``get_<type>_by_field(name)`` for Storm's types, ``size()`` and
    ``field_index(name)``, over the class's ``get_value``, ``get_value_by_field``,
    ``get_fields`` and ``len``."""

    __slots__ = ()

    def size(self) -> int:
        """How many values (Storm's ``size()``)."""
        return len(self)  # type: ignore[arg-type]

    def field_index(self, name: str) -> int:
        """The position of field ``name`` (Storm's ``fieldIndex``); ``ValueError`` naming it if absent."""
        return self.get_fields().index(name)  # type: ignore[attr-defined]

    def get_string(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getString``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_integer(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getInteger``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_long(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getLong``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_boolean(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getBoolean``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_short(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getShort``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_byte(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getByte``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_double(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getDouble``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_float(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getFloat``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_binary(self, i: int) -> Any:
        """The value at ``i`` (Storm's ``getBinary``)."""
        return self.get_value(i)  # type: ignore[attr-defined]

    def get_string_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getStringByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_integer_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getIntegerByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_long_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getLongByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_boolean_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getBooleanByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_short_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getShortByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_byte_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getByteByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_double_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getDoubleByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_float_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getFloatByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]

    def get_binary_by_field(self, name: str) -> Any:
        """The value of field ``name`` (Storm's ``getBinaryByField``)."""
        return self.get_value_by_field(name)  # type: ignore[attr-defined]
