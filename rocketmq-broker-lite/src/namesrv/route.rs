//! The name server's route table (Java `RouteInfoManager`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rocketmq_remoting::protocol::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfigSerializeWrapper, TopicList,
    TopicRouteData,
};
use rocketmq_remoting::protocol::topic::perm;
use rocketmq_remoting::transport::Channel;
use tracing::info;

/// What the name server knows of a live broker address.
#[derive(Debug, Clone)]
pub struct BrokerLiveInfo {
    /// Last registration (ms, name-server clock).
    pub last_update: i64,
    /// Topic-config version last registered.
    pub data_version: DataVersion,
    /// The connection it registered over.
    pub channel: Option<Channel>,
    /// `brokerIP2:haPort`.
    pub ha_server_addr: String,
}

/// A registration request, decoded.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Cluster.
    pub cluster_name: String,
    /// `ip:port`.
    pub broker_addr: String,
    /// Broker name.
    pub broker_name: String,
    /// 0 = master.
    pub broker_id: i64,
    /// HA address.
    pub ha_server_addr: String,
    /// Topics (only a master's are used).
    pub topics: Option<TopicConfigSerializeWrapper>,
    /// Filter servers.
    pub filter_server_list: Vec<String>,
}

/// The answer to a registration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterResult {
    /// The master's HA address (for a slave whose master is registered).
    pub ha_server_addr: Option<String>,
    /// The master's address.
    pub master_addr: Option<String>,
}

/// Route table state.
#[derive(Debug, Default)]
pub struct RouteTable {
    topic_queue_table: BTreeMap<String, BTreeMap<String, QueueData>>,
    broker_addr_table: BTreeMap<String, BrokerData>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<String, BrokerLiveInfo>,
    filter_server_table: HashMap<String, Vec<String>>,
}

impl RouteTable {
    /// Live broker addresses.
    pub fn live_broker_count(&self) -> usize {
        self.broker_live_table.len()
    }

    /// Topics with a route.
    pub fn topic_count(&self) -> usize {
        self.topic_queue_table.len()
    }

    /// Clusters with brokers.
    pub fn cluster_count(&self) -> usize {
        self.cluster_addr_table.len()
    }

    /// Registers (or refreshes) a broker.
    pub fn register(
        &mut self,
        r: Registration,
        channel: Option<Channel>,
        now: i64,
    ) -> RegisterResult {
        self.cluster_addr_table
            .entry(r.cluster_name.clone())
            .or_default()
            .insert(r.broker_name.clone());
        let mut register_first = !self.broker_addr_table.contains_key(&r.broker_name);
        let bd = self
            .broker_addr_table
            .entry(r.broker_name.clone())
            .or_insert_with(|| BrokerData {
                broker_addrs: BTreeMap::new(),
                broker_name: r.broker_name.clone(),
                cluster: r.cluster_name.clone(),
            });
        // One record per ip:port: a slave promoted to master drops its old id.
        bd.broker_addrs
            .retain(|id, addr| *addr != r.broker_addr || *id == r.broker_id);
        let old = bd.broker_addrs.insert(r.broker_id, r.broker_addr.clone());
        register_first |= old.is_none();
        if let Some(wrapper) = &r.topics {
            if r.broker_id == 0 {
                let changed = self
                    .broker_live_table
                    .get(&r.broker_addr)
                    .is_none_or(|l| l.data_version != wrapper.data_version);
                if changed || register_first {
                    for tc in wrapper.topic_config_table.values() {
                        self.topic_queue_table
                            .entry(tc.topic_name.clone())
                            .or_default()
                            .insert(
                                r.broker_name.clone(),
                                QueueData {
                                    broker_name: r.broker_name.clone(),
                                    perm: tc.perm,
                                    read_queue_nums: tc.read_queue_nums,
                                    topic_sys_flag: tc.topic_sys_flag,
                                    write_queue_nums: tc.write_queue_nums,
                                },
                            );
                    }
                }
            }
        }
        let data_version = r
            .topics
            .as_ref()
            .map(|w| w.data_version.clone())
            .unwrap_or_default();
        let prev = self.broker_live_table.insert(
            r.broker_addr.clone(),
            BrokerLiveInfo {
                last_update: now,
                data_version,
                channel,
                ha_server_addr: r.ha_server_addr.clone(),
            },
        );
        if prev.is_none() {
            info!(broker = %r.broker_addr, name = %r.broker_name, id = r.broker_id, "new broker registered");
        }
        if r.filter_server_list.is_empty() {
            self.filter_server_table.remove(&r.broker_addr);
        } else {
            self.filter_server_table
                .insert(r.broker_addr.clone(), r.filter_server_list.clone());
        }
        let mut result = RegisterResult::default();
        if r.broker_id != 0 {
            if let Some(master) = self
                .broker_addr_table
                .get(&r.broker_name)
                .and_then(|b| b.master_addr())
            {
                if let Some(live) = self.broker_live_table.get(master) {
                    result.ha_server_addr = Some(live.ha_server_addr.clone());
                    result.master_addr = Some(master.to_string());
                }
            }
        }
        result
    }

    /// Refreshes a broker's liveness if its data version is unchanged; returns whether it
    /// changed (QUERY_DATA_VERSION).
    pub fn query_data_version(
        &mut self,
        broker_addr: &str,
        version: &DataVersion,
        now: i64,
    ) -> (bool, Option<DataVersion>) {
        match self.broker_live_table.get_mut(broker_addr) {
            Some(live) => {
                let changed = live.data_version != *version;
                if !changed {
                    live.last_update = now;
                }
                (changed, Some(live.data_version.clone()))
            }
            None => (true, None),
        }
    }

    /// Removes a broker address (unregistration, silence or a closed channel).
    pub fn remove_broker_addr(&mut self, broker_addr: &str) {
        self.broker_live_table.remove(broker_addr);
        self.filter_server_table.remove(broker_addr);
        let mut emptied = Vec::new();
        for (name, bd) in self.broker_addr_table.iter_mut() {
            let before = bd.broker_addrs.len();
            bd.broker_addrs.retain(|_, a| a != broker_addr);
            if bd.broker_addrs.len() != before && bd.broker_addrs.is_empty() {
                emptied.push(name.clone());
            }
        }
        for name in emptied {
            info!(broker_name = %name, "broker name has no address left; removing its routes");
            self.broker_addr_table.remove(&name);
            for names in self.cluster_addr_table.values_mut() {
                names.remove(&name);
            }
            self.cluster_addr_table.retain(|_, names| !names.is_empty());
            for queues in self.topic_queue_table.values_mut() {
                queues.remove(&name);
            }
            self.topic_queue_table.retain(|_, q| !q.is_empty());
        }
    }

    /// Unregisters one broker address (UNREGISTER_BROKER), with what it leaves empty. Java's
    /// `unregisterBroker` removes the address its broker name has under the request's
    /// `brokerId`, whatever it is: a replaced master that unregisters late would take its
    /// successor (registered under the same id) out of the routes. Here only `broker_addr`
    /// goes.
    pub fn unregister(&mut self, broker_addr: &str) {
        info!(broker = %broker_addr, "broker unregistered");
        self.remove_broker_addr(broker_addr);
    }

    /// Brokers not heard from since `deadline`.
    pub fn expired(&self, deadline: i64) -> Vec<(String, Option<Channel>)> {
        self.broker_live_table
            .iter()
            .filter(|(_, l)| l.last_update < deadline)
            .map(|(a, l)| (a.clone(), l.channel.clone()))
            .collect()
    }

    /// Broker addresses that registered over `channel`.
    pub fn addrs_of_channel(&self, channel: &Channel) -> Vec<String> {
        self.broker_live_table
            .iter()
            .filter(|(_, l)| l.channel.as_ref() == Some(channel))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// The route of `topic` (`None` unless both queue data and broker data exist).
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let broker_datas: Vec<BrokerData> = queues
            .keys()
            .filter_map(|name| self.broker_addr_table.get(name).cloned())
            .collect();
        if queues.is_empty() || broker_datas.is_empty() {
            return None;
        }
        let mut filter_server_table = BTreeMap::new();
        for bd in &broker_datas {
            for addr in bd.broker_addrs.values() {
                if let Some(list) = self.filter_server_table.get(addr) {
                    filter_server_table.insert(addr.clone(), list.clone());
                }
            }
        }
        Some(TopicRouteData {
            broker_datas,
            filter_server_table,
            order_topic_conf: None,
            queue_datas: queues.values().cloned().collect(),
        })
    }

    /// Every broker and cluster.
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    /// Every topic.
    pub fn topics(&self) -> TopicList {
        TopicList {
            broker_addr: None,
            topic_list: self.topic_queue_table.keys().cloned().collect(),
        }
    }

    /// Topics hosted by the brokers of `cluster`.
    pub fn topics_of_cluster(&self, cluster: &str) -> TopicList {
        let names = self
            .cluster_addr_table
            .get(cluster)
            .cloned()
            .unwrap_or_default();
        TopicList {
            broker_addr: None,
            topic_list: self
                .topic_queue_table
                .iter()
                .filter(|(_, q)| q.keys().any(|n| names.contains(n)))
                .map(|(t, _)| t.clone())
                .collect(),
        }
    }

    /// Removes a topic everywhere (DELETE_TOPIC_IN_NAMESRV without a cluster name).
    pub fn delete_topic(&mut self, topic: &str) {
        self.topic_queue_table.remove(topic);
    }

    /// Removes the queues of `topic` that the brokers of `cluster` serve, and the topic once
    /// no broker serves it (Java `RouteInfoManager.deleteTopic(topic, clusterName)`): the
    /// other clusters' routes of a shared topic stay. An unknown cluster removes nothing.
    pub fn delete_topic_in_cluster(&mut self, topic: &str, cluster: &str) {
        let Some(names) = self.cluster_addr_table.get(cluster) else {
            return;
        };
        let Some(queues) = self.topic_queue_table.get_mut(topic) else {
            return;
        };
        for name in names {
            if queues.remove(name).is_some() {
                info!(broker_name = %name, topic, "deleteTopic, removed one broker's queues");
            }
        }
        if queues.is_empty() {
            info!(
                cluster,
                topic, "deleteTopic, removed the topic's last queues"
            );
            self.topic_queue_table.remove(topic);
        }
    }

    /// Clears the write bit of a broker name's topics (WIPE_WRITE_PERM_OF_BROKER) or sets
    /// their permission to read-write (ADD_WRITE_PERM_OF_BROKER: Java's
    /// `operateWritePermOfBroker` sets `PERM_READ | PERM_WRITE`, whatever the bits were);
    /// returns how many topics the broker name serves.
    pub fn set_write_perm(&mut self, broker_name: &str, writable: bool) -> i32 {
        let mut n = 0;
        for queues in self.topic_queue_table.values_mut() {
            if let Some(q) = queues.get_mut(broker_name) {
                q.perm = if writable {
                    perm::READ | perm::WRITE
                } else {
                    q.perm & !perm::WRITE
                };
                n += 1;
            }
        }
        n
    }

    /// Topics whose first queue data (by broker name) passes `pick` on its topic sys flag (Java
    /// `RouteInfoManager.topicQueueTableIter`, which looks at one queue data per topic only):
    /// GET_UNIT_TOPIC_LIST, GET_HAS_UNIT_SUB_TOPIC_LIST and
    /// GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST.
    pub fn topics_by_sys_flag(&self, pick: impl Fn(i32) -> bool) -> TopicList {
        TopicList {
            broker_addr: None,
            topic_list: self
                .topic_queue_table
                .iter()
                .filter(|(_, queues)| {
                    queues
                        .values()
                        .next()
                        .is_some_and(|q| pick(q.topic_sys_flag))
                })
                .map(|(t, _)| t.clone())
                .collect(),
        }
    }

    /// Whether a broker address is registered.
    pub fn is_live(&self, broker_addr: &str) -> bool {
        self.broker_live_table.contains_key(broker_addr)
    }
}
