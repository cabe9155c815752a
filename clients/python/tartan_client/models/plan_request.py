from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.plan_request_init import PlanRequestInit


T = TypeVar("T", bound="PlanRequest")


@_attrs_define
class PlanRequest:
    """`POST /engine/plan`.

    Attributes:
        goals (list[str]): The goal steps; required.
        init (PlanRequestInit | Unset):
    """

    goals: list[str]
    init: PlanRequestInit | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        goals = self.goals

        init: dict[str, Any] | Unset = UNSET
        if not isinstance(self.init, Unset):
            init = self.init.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "goals": goals,
            }
        )
        if init is not UNSET:
            field_dict["init"] = init

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.plan_request_init import PlanRequestInit

        d = dict(src_dict)
        goals = cast(list[str], d.pop("goals"))

        _init = d.pop("init", UNSET)
        init: PlanRequestInit | Unset
        if isinstance(_init, Unset):
            init = UNSET
        else:
            init = PlanRequestInit.from_dict(_init)

        plan_request = cls(
            goals=goals,
            init=init,
        )

        plan_request.additional_properties = d
        return plan_request

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
