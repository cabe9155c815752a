from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.start_flow_init import StartFlowInit
    from ..models.start_flow_labels import StartFlowLabels


T = TypeVar("T", bound="StartFlow")


@_attrs_define
class StartFlow:
    """`POST /engine/flow`.

    Attributes:
        goals (list[str]): The steps whose completion is the point of the flow; required.
        id (str): The flow's id, sanitised; required.
        deadline_at (Any | Unset): Bounds the whole flow by an absolute time (RFC 3339).
        init (StartFlowInit | Unset):
        labels (StartFlowLabels | Unset):
        max_step_attempts (int | None | Unset): Cap on the attempts of all work items together; the engine default when
            absent.
        timeout (Any | Unset): Bounds the whole flow: a duration, or `{"after": duration, "on_timeout":
            "error"|"cancel"}`.
    """

    goals: list[str]
    id: str
    deadline_at: Any | Unset = UNSET
    init: StartFlowInit | Unset = UNSET
    labels: StartFlowLabels | Unset = UNSET
    max_step_attempts: int | None | Unset = UNSET
    timeout: Any | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        goals = self.goals

        id = self.id

        deadline_at = self.deadline_at

        init: dict[str, Any] | Unset = UNSET
        if not isinstance(self.init, Unset):
            init = self.init.to_dict()

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        max_step_attempts: int | None | Unset
        if isinstance(self.max_step_attempts, Unset):
            max_step_attempts = UNSET
        else:
            max_step_attempts = self.max_step_attempts

        timeout = self.timeout

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "goals": goals,
                "id": id,
            }
        )
        if deadline_at is not UNSET:
            field_dict["deadline_at"] = deadline_at
        if init is not UNSET:
            field_dict["init"] = init
        if labels is not UNSET:
            field_dict["labels"] = labels
        if max_step_attempts is not UNSET:
            field_dict["max_step_attempts"] = max_step_attempts
        if timeout is not UNSET:
            field_dict["timeout"] = timeout

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.start_flow_init import StartFlowInit
        from ..models.start_flow_labels import StartFlowLabels

        d = dict(src_dict)
        goals = cast(list[str], d.pop("goals"))

        id = d.pop("id")

        deadline_at = d.pop("deadline_at", UNSET)

        _init = d.pop("init", UNSET)
        init: StartFlowInit | Unset
        if isinstance(_init, Unset):
            init = UNSET
        else:
            init = StartFlowInit.from_dict(_init)

        _labels = d.pop("labels", UNSET)
        labels: StartFlowLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = StartFlowLabels.from_dict(_labels)

        def _parse_max_step_attempts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_step_attempts = _parse_max_step_attempts(d.pop("max_step_attempts", UNSET))

        timeout = d.pop("timeout", UNSET)

        start_flow = cls(
            goals=goals,
            id=id,
            deadline_at=deadline_at,
            init=init,
            labels=labels,
            max_step_attempts=max_step_attempts,
            timeout=timeout,
        )

        start_flow.additional_properties = d
        return start_flow

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
