//! Name-server requests: REGISTER_BROKER (103), UNREGISTER_BROKER (104),
//! GET_ROUTEINFO_BY_TOPIC (105), QUERY_DATA_VERSION (322), the KV config requests (100-102, 219),
//! GET_TOPICS_BY_CLUSTER (224), WIPE_WRITE_PERM_OF_BROKER (205), ADD_WRITE_PERM_OF_BROKER (327).

use super::header;

header! {
    /// Request header of REGISTER_BROKER.
    pub struct RegisterBrokerRequestHeader {
        /// Broker name.
        pub broker_name: String => "brokerName",
        /// `ip:port` of the broker's main port.
        pub broker_addr: String => "brokerAddr",
        /// Cluster name.
        pub cluster_name: String => "clusterName",
        /// `brokerIP2:haPort`.
        pub ha_server_addr: String => "haServerAddr",
        /// 0 = master.
        pub broker_id: i64 => "brokerId",
        /// Whether the body is the compressed form.
        pub compressed: bool => "compressed" = false,
        /// CRC-32 of the body & 0x7FFFFFFF (0 = not checked).
        pub body_crc32: i32 => "bodyCrc32" = 0,
    }
}

header! {
    /// Response header of REGISTER_BROKER.
    pub struct RegisterBrokerResponseHeader {
        /// The master's HA address (for slaves).
        pub ha_server_addr: Option<String> => "haServerAddr",
        /// The master's address (for slaves).
        pub master_addr: Option<String> => "masterAddr",
    }
}

header! {
    /// Request header of UNREGISTER_BROKER and QUERY_DATA_VERSION.
    pub struct UnregisterBrokerRequestHeader {
        /// Broker name.
        pub broker_name: String => "brokerName",
        /// Broker address.
        pub broker_addr: String => "brokerAddr",
        /// Cluster name.
        pub cluster_name: String => "clusterName",
        /// Broker id.
        pub broker_id: i64 => "brokerId",
    }
}

/// QUERY_DATA_VERSION has the same fields as UNREGISTER_BROKER.
pub type QueryDataVersionRequestHeader = UnregisterBrokerRequestHeader;

header! {
    /// Response header of QUERY_DATA_VERSION.
    pub struct QueryDataVersionResponseHeader {
        /// Whether the broker's data version differs from the stored one.
        pub changed: bool => "changed" = false,
    }
}

header! {
    /// Request header of GET_ROUTEINFO_BY_TOPIC.
    pub struct GetRouteInfoRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Ask for standard JSON (quoted numeric keys).
        pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

header! {
    /// Request header of PUT_KV_CONFIG.
    pub struct PutKvConfigRequestHeader {
        /// Namespace.
        pub namespace: String => "namespace",
        /// Key.
        pub key: String => "key",
        /// Value.
        pub value: String => "value",
    }
}

header! {
    /// Request header of GET_KV_CONFIG and DELETE_KV_CONFIG.
    pub struct KvConfigKeyRequestHeader {
        /// Namespace.
        pub namespace: String => "namespace",
        /// Key.
        pub key: String => "key",
    }
}

header! {
    /// Response header of GET_KV_CONFIG.
    pub struct GetKvConfigResponseHeader {
        /// Value.
        pub value: Option<String> => "value",
    }
}

header! {
    /// Request header of GET_KVLIST_BY_NAMESPACE.
    pub struct GetKvListByNamespaceRequestHeader {
        /// Namespace.
        pub namespace: String => "namespace",
    }
}

header! {
    /// Request header of GET_TOPICS_BY_CLUSTER.
    pub struct GetTopicsByClusterRequestHeader {
        /// Cluster name.
        pub cluster: String => "cluster",
    }
}

header! {
    /// Request header of WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER.
    pub struct BrokerWritePermRequestHeader {
        /// Broker name.
        pub broker_name: String => "brokerName",
    }
}

header! {
    /// Response header of WIPE_WRITE_PERM_OF_BROKER.
    pub struct WipeWritePermOfBrokerResponseHeader {
        /// Number of topics whose write permission was removed.
        pub wipe_topic_count: i32 => "wipeTopicCount",
    }
}

header! {
    /// Response header of ADD_WRITE_PERM_OF_BROKER.
    pub struct AddWritePermOfBrokerResponseHeader {
        /// Number of topics whose write permission was added.
        pub add_topic_count: i32 => "addTopicCount",
    }
}
