from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.concurrency import Concurrency
    from ..models.start_flow_init import StartFlowInit
    from ..models.start_flow_labels import StartFlowLabels


T = TypeVar("T", bound="StartFlow")


@_attrs_define
class StartFlow:
    """`POST /engine/flow`.

    Attributes:
        goals (list[str]): The steps whose completion is the point of the flow; required.
        id (str): The flow's id, sanitised; required.
        concurrency (Concurrency | None | Unset):
        deadline_at (Any | Unset): Bounds the whole flow by an absolute time (RFC 3339).
        init (StartFlowInit | Unset):
        labels (StartFlowLabels | Unset):
        max_step_attempts (int | None | Unset): Cap on the attempts of all work items together; the engine default when
            absent.
        priority (int | Unset): Higher goes first wherever flows and their calls wait: call slots,
            lanes, concurrency keys; each point is worth a second of waiting
            (docs/concurrency.md, "Priority"). -1000 to 1000, default 0.
        start_at (datetime.datetime | None | Unset): A delayed start: no step starts before this time (RFC 3339). A time
            already past starts the flow at once. Not with `start_in`.
        start_in (None | str | Unset): A delayed start: no step starts before this duration has passed (any
            duration form). Not with `start_at`. Example: 10m.
        timeout (Any | Unset): Bounds the whole flow: a duration, or `{"after": duration, "on_timeout":
            "error"|"cancel"}`.
    """

    goals: list[str]
    id: str
    concurrency: Concurrency | None | Unset = UNSET
    deadline_at: Any | Unset = UNSET
    init: StartFlowInit | Unset = UNSET
    labels: StartFlowLabels | Unset = UNSET
    max_step_attempts: int | None | Unset = UNSET
    priority: int | Unset = UNSET
    start_at: datetime.datetime | None | Unset = UNSET
    start_in: None | str | Unset = UNSET
    timeout: Any | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.concurrency import Concurrency

        goals = self.goals

        id = self.id

        concurrency: dict[str, Any] | None | Unset
        if isinstance(self.concurrency, Unset):
            concurrency = UNSET
        elif isinstance(self.concurrency, Concurrency):
            concurrency = self.concurrency.to_dict()
        else:
            concurrency = self.concurrency

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

        priority = self.priority

        start_at: None | str | Unset
        if isinstance(self.start_at, Unset):
            start_at = UNSET
        elif isinstance(self.start_at, datetime.datetime):
            start_at = self.start_at.isoformat()
        else:
            start_at = self.start_at

        start_in: None | str | Unset
        if isinstance(self.start_in, Unset):
            start_in = UNSET
        else:
            start_in = self.start_in

        timeout = self.timeout

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "goals": goals,
                "id": id,
            }
        )
        if concurrency is not UNSET:
            field_dict["concurrency"] = concurrency
        if deadline_at is not UNSET:
            field_dict["deadline_at"] = deadline_at
        if init is not UNSET:
            field_dict["init"] = init
        if labels is not UNSET:
            field_dict["labels"] = labels
        if max_step_attempts is not UNSET:
            field_dict["max_step_attempts"] = max_step_attempts
        if priority is not UNSET:
            field_dict["priority"] = priority
        if start_at is not UNSET:
            field_dict["start_at"] = start_at
        if start_in is not UNSET:
            field_dict["start_in"] = start_in
        if timeout is not UNSET:
            field_dict["timeout"] = timeout

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.concurrency import Concurrency
        from ..models.start_flow_init import StartFlowInit
        from ..models.start_flow_labels import StartFlowLabels

        d = dict(src_dict)
        goals = cast(list[str], d.pop("goals"))

        id = d.pop("id")

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

        priority = d.pop("priority", UNSET)

        def _parse_start_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                start_at_type_0 = datetime.datetime.fromisoformat(data)

                return start_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        start_at = _parse_start_at(d.pop("start_at", UNSET))

        def _parse_start_in(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        start_in = _parse_start_in(d.pop("start_in", UNSET))

        timeout = d.pop("timeout", UNSET)

        start_flow = cls(
            goals=goals,
            id=id,
            concurrency=concurrency,
            deadline_at=deadline_at,
            init=init,
            labels=labels,
            max_step_attempts=max_step_attempts,
            priority=priority,
            start_at=start_at,
            start_in=start_in,
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
