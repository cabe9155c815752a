from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.work_item import WorkItem


T = TypeVar("T", bound="WorkList")


@_attrs_define
class WorkList:
    """Work items, with the cursor of the next page when there is more.

    Attributes:
        count (int):
        work_items (list[WorkItem]):
        next_cursor (None | str | Unset):
    """

    count: int
    work_items: list[WorkItem]
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        count = self.count

        work_items = []
        for work_items_item_data in self.work_items:
            work_items_item = work_items_item_data.to_dict()
            work_items.append(work_items_item)

        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "count": count,
                "work_items": work_items,
            }
        )
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.work_item import WorkItem

        d = dict(src_dict)
        count = d.pop("count")

        work_items = []
        _work_items = d.pop("work_items")
        for work_items_item_data in _work_items:
            work_items_item = WorkItem.from_dict(work_items_item_data)

            work_items.append(work_items_item)

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))

        work_list = cls(
            count=count,
            work_items=work_items,
            next_cursor=next_cursor,
        )

        work_list.additional_properties = d
        return work_list

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
