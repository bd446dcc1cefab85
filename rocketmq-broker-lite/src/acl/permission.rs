//! Permissions of Apache's plain ACL (`Permission`): bits, their text form, and the check.

/// Nothing allowed (wins over every other bit).
pub const DENY: u8 = 1;
/// Needed: publish or subscribe, either will do.
pub const ANY: u8 = 2;
/// Publish (send).
pub const PUB: u8 = 4;
/// Subscribe (pull, commit offsets, heartbeats of a consumer group).
pub const SUB: u8 = 8;

/// Request codes only an `admin: true` account may send: Java 4.9.8's `Permission.ADMIN_CODE`
/// (UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, DELETE_TOPIC_IN_BROKER,
/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP) and, unlike 4.9.8 (as Apache
/// 5 does), the ACL's own requests: UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
/// GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG. In 4.9.8 any signed account,
/// even one denied everything, could make itself admin or open the global white list.
pub const ADMIN_CODES: [i32; 9] = [17, 25, 215, 200, 207, 50, 51, 52, 53];

/// Parses `PUB`, `SUB`, `PUB|SUB` (or `SUB|PUB`) and `DENY`; anything else, an absent value
/// included, is DENY (as Java's `parsePermFromString`).
pub fn parse(text: Option<&str>) -> u8 {
    match text.map(str::trim) {
        Some("PUB") => PUB,
        Some("SUB") => SUB,
        Some("PUB|SUB") | Some("SUB|PUB") => PUB | SUB,
        _ => DENY,
    }
}

/// Whether `owned` grants `needed` (Java's `checkPermission`).
pub fn allows(owned: u8, needed: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_parse_and_check_as_java() {
        assert_eq!(parse(Some(" PUB ")), PUB);
        assert_eq!(parse(Some("SUB|PUB")), PUB | SUB);
        for deny in [None, Some("pub"), Some("PUB | SUB"), Some(""), Some("DENY")] {
            assert_eq!(parse(deny), DENY, "{deny:?}");
        }
        assert!(allows(PUB, PUB) && !allows(SUB, PUB) && allows(PUB | SUB, SUB));
        assert!(allows(SUB, ANY) && !allows(DENY, ANY) && !allows(DENY | PUB, PUB));
    }
}
