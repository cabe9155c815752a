from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetryBody")


@_attrs_define
class RetryBody:
    """A retry's optional body.

    Attributes:
        reset_attempts (bool | Unset): Restarted work items count attempts from 1 again (the default), or
            go on counting (`false`).
    """

    reset_attempts: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        reset_attempts = self.reset_attempts

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if reset_attempts is not UNSET:
            field_dict["reset_attempts"] = reset_attempts

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        reset_attempts = d.pop("reset_attempts", UNSET)

        retry_body = cls(
            reset_attempts=reset_attempts,
        )

        return retry_body
