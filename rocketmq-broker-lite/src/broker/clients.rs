//! Producer and consumer groups: which client connections belong to them, with what
//! subscriptions; expiry of silent clients; NOTIFY_CONSUMER_IDS_CHANGED.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use rocketmq_remoting::protocol::body::{
    ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData,
};
use rocketmq_remoting::protocol::LanguageCode;
use rocketmq_remoting::transport::Channel;
use tracing::info;

/// One client connection of a group.
#[derive(Debug, Clone)]
pub struct ClientChannelInfo {
    /// The connection.
    pub channel: Channel,
    /// Client id (`ip@instance`).
    pub client_id: String,
    /// Language it reported.
    pub language: LanguageCode,
    /// Version it reported.
    pub version: i32,
    /// Last heartbeat (ms).
    pub last_update: i64,
}

/// A consumer group as its members describe it.
#[derive(Debug, Clone)]
pub struct ConsumerGroupInfo {
    /// Group name.
    pub group: String,
    /// Members by connection id.
    pub channels: HashMap<u64, ClientChannelInfo>,
    /// Subscriptions by topic.
    pub subscriptions: BTreeMap<String, SubscriptionData>,
    /// Pull or push.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Where new consumers start.
    pub consume_from_where: ConsumeFromWhere,
}

impl ConsumerGroupInfo {
    /// Client ids of the members, one per connection (sorted): two connections that report
    /// one client id give it twice, as Java's `ConsumerGroupInfo.getAllClientId` does (its
    /// table is keyed by channel).
    pub fn client_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .channels
            .values()
            .map(|c| c.client_id.clone())
            .collect();
        ids.sort();
        ids
    }
}

/// What changed when a consumer registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Registered {
    /// A connection joined the group.
    pub new_member: bool,
    /// The group's subscriptions gained or lost a topic.
    pub subscriptions_changed: bool,
}

impl Registered {
    /// Whether the group changed, so that its members are told (Java `registerConsumer`
    /// notifies CHANGE on `r1 || r2`: a new member, or a topic added or removed).
    pub fn changed(&self) -> bool {
        self.new_member || self.subscriptions_changed
    }
}

/// All producer and consumer groups.
#[derive(Debug, Default)]
pub struct ClientManager {
    producers: Mutex<HashMap<String, HashMap<u64, ClientChannelInfo>>>,
    consumers: Mutex<HashMap<String, ConsumerGroupInfo>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClientManager {
    /// Records (or refreshes) a producer connection.
    pub fn register_producer(&self, group: &str, info: ClientChannelInfo) {
        let client = info.client_id.clone();
        let remote = info.channel.remote_addr();
        let mut p = lock(&self.producers);
        let g = p.entry(group.to_string()).or_default();
        if g.insert(info.channel.id(), info).is_none() {
            info!(group, %client, %remote, members = g.len(), "producer joined its group");
        }
    }

    /// Removes a producer connection from a group.
    pub fn unregister_producer(&self, group: &str, channel_id: u64) {
        let mut p = lock(&self.producers);
        if let Some(g) = p.get_mut(group) {
            if let Some(gone) = g.remove(&channel_id) {
                info!(group, client = %gone.client_id, members = g.len(), "producer left its group");
            }
            if g.is_empty() {
                p.remove(group);
            }
        }
    }

    /// Records (or refreshes) a consumer connection and its group's subscriptions. The
    /// heartbeat's subscriptions replace the group's as Java's
    /// `ConsumerGroupInfo.updateSubscription` does: a new topic is added, a strictly newer
    /// version replaces an older one (the same version keeps the one registered), and a topic
    /// the heartbeat no longer lists is removed.
    #[allow(clippy::too_many_arguments)]
    pub fn register_consumer(
        &self,
        group: &str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: Vec<SubscriptionData>,
    ) -> Registered {
        let mut c = lock(&self.consumers);
        let g = c
            .entry(group.to_string())
            .or_insert_with(|| ConsumerGroupInfo {
                group: group.to_string(),
                channels: HashMap::new(),
                subscriptions: BTreeMap::new(),
                consume_type,
                message_model,
                consume_from_where,
            });
        g.consume_type = consume_type;
        g.message_model = message_model;
        g.consume_from_where = consume_from_where;
        let client = info.client_id.clone();
        let remote = info.channel.remote_addr();
        let new_member = g.channels.insert(info.channel.id(), info).is_none();
        if new_member {
            info!(group, %client, %remote, members = g.channels.len(), "consumer joined its group");
        }
        let mut subscriptions_changed = false;
        g.subscriptions.retain(|topic, _| {
            let keep = subscriptions.iter().any(|s| s.topic == *topic);
            if !keep {
                info!(group, topic, "subscription changed: topic removed");
                subscriptions_changed = true;
            }
            keep
        });
        for s in subscriptions {
            match g.subscriptions.get(&s.topic) {
                // Only a strictly newer version replaces (Java `sub.getSubVersion() >
                // old.getSubVersion()`): the same version keeps what the broker has.
                Some(old) if old.sub_version >= s.sub_version => {}
                Some(_) => {
                    g.subscriptions.insert(s.topic.clone(), s);
                }
                None => {
                    info!(group, topic = %s.topic, "subscription changed: topic added");
                    subscriptions_changed = true;
                    g.subscriptions.insert(s.topic.clone(), s);
                }
            }
        }
        Registered {
            new_member,
            subscriptions_changed,
        }
    }

    /// Removes a consumer connection from a group; returns whether the group existed (a
    /// member or not, the connection is no longer one).
    pub fn unregister_consumer(&self, group: &str, channel_id: u64) -> bool {
        let mut c = lock(&self.consumers);
        let Some(g) = c.get_mut(group) else {
            return false;
        };
        if let Some(gone) = g.channels.remove(&channel_id) {
            info!(group, client = %gone.client_id, members = g.channels.len(), "consumer left its group");
        }
        if g.channels.is_empty() {
            c.remove(group);
        }
        true
    }

    /// Removes a connection everywhere (it closed); returns the consumer groups it left.
    pub fn channel_closed(&self, channel_id: u64) -> Vec<String> {
        {
            let mut p = lock(&self.producers);
            for g in p.values_mut() {
                g.remove(&channel_id);
            }
            p.retain(|_, g| !g.is_empty());
        }
        let mut left = Vec::new();
        let mut c = lock(&self.consumers);
        for (name, g) in c.iter_mut() {
            if let Some(gone) = g.channels.remove(&channel_id) {
                info!(group = %name, client = %gone.client_id, members = g.channels.len(), "consumer's connection closed; it left its group");
                left.push(name.clone());
            }
        }
        c.retain(|_, g| !g.channels.is_empty());
        left
    }

    /// Removes connections silent since `deadline`; returns them and the consumer groups that
    /// lost members.
    pub fn expire(&self, deadline: i64) -> (Vec<Channel>, Vec<String>) {
        let mut closed = Vec::new();
        {
            let mut p = lock(&self.producers);
            for g in p.values_mut() {
                g.retain(|_, i| {
                    let keep = i.last_update >= deadline;
                    if !keep {
                        closed.push(i.channel.clone());
                    }
                    keep
                });
            }
            p.retain(|_, g| !g.is_empty());
        }
        let mut groups = Vec::new();
        let mut c = lock(&self.consumers);
        for (name, g) in c.iter_mut() {
            let before = g.channels.len();
            g.channels.retain(|_, i| {
                let keep = i.last_update >= deadline;
                if !keep {
                    closed.push(i.channel.clone());
                }
                keep
            });
            if g.channels.len() != before {
                groups.push(name.clone());
            }
        }
        c.retain(|_, g| !g.channels.is_empty());
        for ch in &closed {
            info!(remote = %ch.remote_addr(), "client silent past the expiry; its connection is closed");
        }
        (closed, groups)
    }

    /// A consumer group.
    pub fn consumer_group(&self, group: &str) -> Option<ConsumerGroupInfo> {
        lock(&self.consumers).get(group).cloned()
    }

    /// What `f` reads of a consumer group's info, without copying it (`None`: no such group).
    pub fn with_consumer_group<R>(
        &self,
        group: &str,
        f: impl FnOnce(&ConsumerGroupInfo) -> R,
    ) -> Option<R> {
        lock(&self.consumers).get(group).map(f)
    }

    /// The subscription of a group to a topic.
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        lock(&self.consumers)
            .get(group)
            .and_then(|g| g.subscriptions.get(topic).cloned())
    }

    /// Connections of a group's consumers.
    pub fn consumer_channels(&self, group: &str) -> Vec<Channel> {
        lock(&self.consumers)
            .get(group)
            .map(|g| g.channels.values().map(|c| c.channel.clone()).collect())
            .unwrap_or_default()
    }

    /// An active producer connection of `group` (for transaction checks).
    pub fn producer_channel(&self, group: &str) -> Option<Channel> {
        lock(&self.producers).get(group).and_then(|g| {
            g.values()
                .filter(|c| c.channel.is_active())
                .max_by_key(|c| c.last_update)
                .map(|c| c.channel.clone())
        })
    }

    /// The connection of the producer whose client id is `client_id`, in any group (Java
    /// `ProducerManager.findChannel`, used to push replies): the most recently heard of when
    /// the id has several, an open one first.
    pub fn find_producer_channel(&self, client_id: &str) -> Option<Channel> {
        lock(&self.producers)
            .values()
            .flat_map(|g| g.values())
            .filter(|c| c.client_id == client_id)
            .max_by_key(|c| (c.channel.is_active(), c.last_update))
            .map(|c| c.channel.clone())
    }

    /// Producer connections of a group.
    pub fn producer_channels(&self, group: &str) -> Vec<ClientChannelInfo> {
        lock(&self.producers)
            .get(group)
            .map(|g| g.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether `group` is online with subscriptions, none of them to `topic` (Java's
    /// `findSubscriptionData(group, topic) == null && findSubscriptionDataCount(group) > 0`):
    /// the statistics of a group leave out the topics it no longer consumes.
    pub fn online_without(&self, group: &str, topic: &str) -> bool {
        lock(&self.consumers)
            .get(group)
            .is_some_and(|g| !g.subscriptions.is_empty() && !g.subscriptions.contains_key(topic))
    }

    /// Every producer group with its connections (Java `ProducerManager.getProducerTable`).
    pub fn producer_table(&self) -> BTreeMap<String, Vec<ClientChannelInfo>> {
        lock(&self.producers)
            .iter()
            .map(|(group, members)| (group.clone(), members.values().cloned().collect()))
            .collect()
    }

    /// Names of the consumer groups subscribed to `topic`.
    pub fn groups_subscribed_to(&self, topic: &str) -> Vec<String> {
        lock(&self.consumers)
            .values()
            .filter(|g| g.subscriptions.contains_key(topic))
            .map(|g| g.group.clone())
            .collect()
    }
}
