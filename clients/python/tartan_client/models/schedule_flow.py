from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.schedule_flow_init import ScheduleFlowInit
    from ..models.schedule_flow_labels import ScheduleFlowLabels


T = TypeVar("T", bound="ScheduleFlow")


@_attrs_define
class ScheduleFlow:
    """The flow a schedule starts: a start request without an id.

    Attributes:
        goals (list[str]):
        init (ScheduleFlowInit | Unset):
        labels (ScheduleFlowLabels | Unset):
    """

    goals: list[str]
    init: ScheduleFlowInit | Unset = UNSET
    labels: ScheduleFlowLabels | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        goals = self.goals

        init: dict[str, Any] | Unset = UNSET
        if not isinstance(self.init, Unset):
            init = self.init.to_dict()

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "goals": goals,
            }
        )
        if init is not UNSET:
            field_dict["init"] = init
        if labels is not UNSET:
            field_dict["labels"] = labels

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.schedule_flow_init import ScheduleFlowInit
        from ..models.schedule_flow_labels import ScheduleFlowLabels

        d = dict(src_dict)
        goals = cast(list[str], d.pop("goals"))

        _init = d.pop("init", UNSET)
        init: ScheduleFlowInit | Unset
        if isinstance(_init, Unset):
            init = UNSET
        else:
            init = ScheduleFlowInit.from_dict(_init)

        _labels = d.pop("labels", UNSET)
        labels: ScheduleFlowLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = ScheduleFlowLabels.from_dict(_labels)

        schedule_flow = cls(
            goals=goals,
            init=init,
            labels=labels,
        )

        schedule_flow.additional_properties = d
        return schedule_flow

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
