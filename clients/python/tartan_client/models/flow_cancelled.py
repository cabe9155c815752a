from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FlowCancelled")


@_attrs_define
class FlowCancelled:
    """A cancelled flow; `compensate` is false for a kill.

    Attributes:
        compensate (bool):
        flow_id (str):
        message (str):  Example: Flow cancelled.
    """

    compensate: bool
    flow_id: str
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        compensate = self.compensate

        flow_id = self.flow_id

        message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "compensate": compensate,
                "flow_id": flow_id,
                "message": message,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        compensate = d.pop("compensate")

        flow_id = d.pop("flow_id")

        message = d.pop("message")

        flow_cancelled = cls(
            compensate=compensate,
            flow_id=flow_id,
            message=message,
        )

        flow_cancelled.additional_properties = d
        return flow_cancelled

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
