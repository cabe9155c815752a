from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ParentLink")


@_attrs_define
class ParentLink:
    """The work item a child flow runs for, as Argyll's metadata names it.

    Attributes:
        parent_flow_id (str):
        parent_step_id (str):
        parent_work_item_token (str):
    """

    parent_flow_id: str
    parent_step_id: str
    parent_work_item_token: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        parent_flow_id = self.parent_flow_id

        parent_step_id = self.parent_step_id

        parent_work_item_token = self.parent_work_item_token

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "parent_flow_id": parent_flow_id,
                "parent_step_id": parent_step_id,
                "parent_work_item_token": parent_work_item_token,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        parent_flow_id = d.pop("parent_flow_id")

        parent_step_id = d.pop("parent_step_id")

        parent_work_item_token = d.pop("parent_work_item_token")

        parent_link = cls(
            parent_flow_id=parent_flow_id,
            parent_step_id=parent_step_id,
            parent_work_item_token=parent_work_item_token,
        )

        parent_link.additional_properties = d
        return parent_link

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
