from enum import StrEnum


class OnTimeout(StrEnum):
    CANCEL = "cancel"
    ERROR = "error"

    def __str__(self) -> str:
        return str(self.value)
