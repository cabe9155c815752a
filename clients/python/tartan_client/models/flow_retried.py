from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FlowRetried")


@_attrs_define
class FlowRetried:
    """A flow running again (docs/api.md, "Retry and kill").

    Attributes:
        flow_id (str):
        message (str):  Example: Flow retried.
        reset_attempts (bool):
    """

    flow_id: str
    message: str
    reset_attempts: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        flow_id = self.flow_id

        message = self.message

        reset_attempts = self.reset_attempts

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "flow_id": flow_id,
                "message": message,
                "reset_attempts": reset_attempts,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        flow_id = d.pop("flow_id")

        message = d.pop("message")

        reset_attempts = d.pop("reset_attempts")

        flow_retried = cls(
            flow_id=flow_id,
            message=message,
            reset_attempts=reset_attempts,
        )

        flow_retried.additional_properties = d
        return flow_retried

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
