from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.fire_shown import FireShown
    from ..models.last_fire_shown import LastFireShown
    from ..models.schedule_request import ScheduleRequest


T = TypeVar("T", bound="ScheduleShown")


@_attrs_define
class ScheduleShown:
    """A schedule: as given, its state, its next fire times and last fires.

    Attributes:
        created_at (datetime.datetime):
        id (str):
        next_ (list[str]): The next five fire times; empty while paused or once none is left.
        paused (bool):
        spec (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.
        updated_at (datetime.datetime):
        buffered (datetime.datetime | None | Unset): A fire kept by `overlap: buffer_one`: it starts when the running
            flow ends.
        fires (list[FireShown] | Unset): The latest fires, newest first (`GET /engine/schedule/{id}` only).
        last (LastFireShown | None | Unset):
    """

    created_at: datetime.datetime
    id: str
    next_: list[str]
    paused: bool
    spec: ScheduleRequest
    updated_at: datetime.datetime
    buffered: datetime.datetime | None | Unset = UNSET
    fires: list[FireShown] | Unset = UNSET
    last: LastFireShown | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.last_fire_shown import LastFireShown

        created_at = self.created_at.isoformat()

        id = self.id

        next_ = self.next_

        paused = self.paused

        spec = self.spec.to_dict()

        updated_at = self.updated_at.isoformat()

        buffered: None | str | Unset
        if isinstance(self.buffered, Unset):
            buffered = UNSET
        elif isinstance(self.buffered, datetime.datetime):
            buffered = self.buffered.isoformat()
        else:
            buffered = self.buffered

        fires: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.fires, Unset):
            fires = []
            for fires_item_data in self.fires:
                fires_item = fires_item_data.to_dict()
                fires.append(fires_item)

        last: dict[str, Any] | None | Unset
        if isinstance(self.last, Unset):
            last = UNSET
        elif isinstance(self.last, LastFireShown):
            last = self.last.to_dict()
        else:
            last = self.last

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "id": id,
                "next": next_,
                "paused": paused,
                "spec": spec,
                "updated_at": updated_at,
            }
        )
        if buffered is not UNSET:
            field_dict["buffered"] = buffered
        if fires is not UNSET:
            field_dict["fires"] = fires
        if last is not UNSET:
            field_dict["last"] = last

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.fire_shown import FireShown
        from ..models.last_fire_shown import LastFireShown
        from ..models.schedule_request import ScheduleRequest

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = d.pop("id")

        next_ = cast(list[str], d.pop("next"))

        paused = d.pop("paused")

        spec = ScheduleRequest.from_dict(d.pop("spec"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_buffered(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                buffered_type_0 = datetime.datetime.fromisoformat(data)

                return buffered_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        buffered = _parse_buffered(d.pop("buffered", UNSET))

        _fires = d.pop("fires", UNSET)
        fires: list[FireShown] | Unset = UNSET
        if _fires is not UNSET:
            fires = []
            for fires_item_data in _fires:
                fires_item = FireShown.from_dict(fires_item_data)

                fires.append(fires_item)

        def _parse_last(data: object) -> LastFireShown | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_type_0 = LastFireShown.from_dict(data)

                return last_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LastFireShown | None | Unset, data)

        last = _parse_last(d.pop("last", UNSET))

        schedule_shown = cls(
            created_at=created_at,
            id=id,
            next_=next_,
            paused=paused,
            spec=spec,
            updated_at=updated_at,
            buffered=buffered,
            fires=fires,
            last=last,
        )

        schedule_shown.additional_properties = d
        return schedule_shown

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
