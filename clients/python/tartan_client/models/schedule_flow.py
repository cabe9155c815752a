from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.concurrency import Concurrency
    from ..models.schedule_flow_init import ScheduleFlowInit
    from ..models.schedule_flow_labels import ScheduleFlowLabels


T = TypeVar("T", bound="ScheduleFlow")


@_attrs_define
class ScheduleFlow:
    """The flow a schedule starts: a start request without an id.

    Attributes:
        goals (list[str]):
        concurrency (Concurrency | None | Unset):
        init (ScheduleFlowInit | Unset):
        labels (ScheduleFlowLabels | Unset):
        priority (int | Unset): The priority of every flow it starts (docs/concurrency.md).
    """

    goals: list[str]
    concurrency: Concurrency | None | Unset = UNSET
    init: ScheduleFlowInit | Unset = UNSET
    labels: ScheduleFlowLabels | Unset = UNSET
    priority: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.concurrency import Concurrency

        goals = self.goals

        concurrency: dict[str, Any] | None | Unset
        if isinstance(self.concurrency, Unset):
            concurrency = UNSET
        elif isinstance(self.concurrency, Concurrency):
            concurrency = self.concurrency.to_dict()
        else:
            concurrency = self.concurrency

        init: dict[str, Any] | Unset = UNSET
        if not isinstance(self.init, Unset):
            init = self.init.to_dict()

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        priority = self.priority

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "goals": goals,
            }
        )
        if concurrency is not UNSET:
            field_dict["concurrency"] = concurrency
        if init is not UNSET:
            field_dict["init"] = init
        if labels is not UNSET:
            field_dict["labels"] = labels
        if priority is not UNSET:
            field_dict["priority"] = priority

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.concurrency import Concurrency
        from ..models.schedule_flow_init import ScheduleFlowInit
        from ..models.schedule_flow_labels import ScheduleFlowLabels

        d = dict(src_dict)
        goals = cast(list[str], d.pop("goals"))

        def _parse_concurrency(data: object) -> Concurrency | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                concurrency_type_0 = Concurrency.from_dict(data)

                return concurrency_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Concurrency | None | Unset, data)

        concurrency = _parse_concurrency(d.pop("concurrency", UNSET))

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

        priority = d.pop("priority", UNSET)

        schedule_flow = cls(
            goals=goals,
            concurrency=concurrency,
            init=init,
            labels=labels,
            priority=priority,
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
