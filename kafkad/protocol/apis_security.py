"""Schema tables for ACL and SCRAM credential APIs (DescribeAcls, CreateAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials).

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json.
"""

from kafkad.protocol.schema import Api, F
from kafkad.protocol.shapes import error_pair, resource, throttle

_ACL_FILTER = (
    F("resource_type_filter", "int8", "0+"),
    F("resource_name_filter", "string", "0+", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", "0+", nullable="0+"),
    F("host_filter", "string", "0+", nullable="0+"),
    F("operation", "int8", "0+"),
    F("permission_type", "int8", "0+"),
)

_ACL_ENTRY = (
    F("principal", "string", "0+"),
    F("host", "string", "0+"),
    F("operation", "int8", "0+"),
    F("permission_type", "int8", "0+"),
)

_USER_RESULT = (F("user", "string", "0+"), *error_pair())

DESCRIBE_ACLS = Api(
    29,
    "DescribeAcls",
    versions=(0, 3),
    flexible="2+",
    request=_ACL_FILTER,
    response=(
        throttle(),
        *error_pair(),
        F(
            "resources",
            "[]",
            "0+",
            fields=(
                *resource(),
                F("pattern_type", "int8", "1+", default=3),
                F("acls", "[]", "0+", fields=_ACL_ENTRY),
            ),
        ),
    ),
)

CREATE_ACLS = Api(
    30,
    "CreateAcls",
    versions=(0, 3),
    flexible="2+",
    request=(
        F(
            "creations",
            "[]",
            "0+",
            fields=(*resource(), F("resource_pattern_type", "int8", "1+", default=3), *_ACL_ENTRY),
        ),
    ),
    response=(throttle(), F("results", "[]", "0+", fields=error_pair())),
)

DELETE_ACLS = Api(
    31,
    "DeleteAcls",
    versions=(0, 3),
    flexible="2+",
    request=(F("filters", "[]", "0+", fields=_ACL_FILTER),),
    response=(
        throttle(),
        F(
            "filter_results",
            "[]",
            "0+",
            fields=(
                *error_pair(),
                F(
                    "matching_acls",
                    "[]",
                    "0+",
                    fields=(
                        *error_pair(),
                        *resource(),
                        F("pattern_type", "int8", "1+", default=3),
                        *_ACL_ENTRY,
                    ),
                ),
            ),
        ),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    50,
    "DescribeUserScramCredentials",
    versions=(0, 0),
    flexible="0+",
    request=(F("users", "[]", "0+", nullable="0+", fields=(F("name", "string", "0+"),)),),
    response=(
        throttle(),
        *error_pair(),
        F(
            "results",
            "[]",
            "0+",
            fields=(
                *_USER_RESULT,
                F(
                    "credential_infos",
                    "[]",
                    "0+",
                    fields=(F("mechanism", "int8", "0+"), F("iterations", "int32", "0+")),
                ),
            ),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    51,
    "AlterUserScramCredentials",
    versions=(0, 0),
    flexible="0+",
    request=(
        F("deletions", "[]", "0+", fields=(F("name", "string", "0+"), F("mechanism", "int8", "0+"))),
        F(
            "upsertions",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F("mechanism", "int8", "0+"),
                F("iterations", "int32", "0+"),
                F("salt", "bytes", "0+"),
                F("salted_password", "bytes", "0+"),
            ),
        ),
    ),
    response=(throttle(), F("results", "[]", "0+", fields=_USER_RESULT)),
)
