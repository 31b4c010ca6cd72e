"""Wire enums of the config APIs (DescribeConfigs, AlterConfigs), shared by the broker and the tools."""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    """`ConfigResource.Type`: which entity a DescribeConfigs/AlterConfigs resource names."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8


class DescribeConfigSource(IntEnum):
    """DescribeConfigs' `config_source` (named like the admin client's `ConfigEntry.ConfigSource`)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
