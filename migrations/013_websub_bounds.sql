-- WebSub hub bounds per callback host and per client: every subscription and every task names the host
-- of its callback (its name or address literal, lower case, without the port: one machine on many ports
-- is one host), and an intent (a verification of intent or a denial, each a request to the callback) the
-- client address that asked for it (IPv6: its /64). The hub counts them, index-bounded, before it queues
-- outbound work; its worker skips the tasks of a host that already has its requests in flight.

alter table websub_subscriptions add column callback_host text;
alter table websub_tasks add column callback_host text;
alter table websub_tasks add column requested_by text;

-- The rows written before: the host as the URL parser writes it (the callback was stored normalised:
-- scheme, then the host, no credentials), the port dropped.
update websub_subscriptions
   set callback_host = lower(substring(callback from '^[A-Za-z][A-Za-z0-9+.-]*://(\[[^]]*\]|[^:/?#]*)'));
update websub_tasks
   set callback_host = lower(substring(callback from '^[A-Za-z][A-Za-z0-9+.-]*://(\[[^]]*\]|[^:/?#]*)'))
 where callback is not null;
update websub_tasks t set callback_host = s.callback_host from websub_subscriptions s where t.subscription_id = s.id;

-- A host's unexpired subscriptions (WEBSUB_MAX_PER_HOST).
create index websub_subscriptions_callback_host on websub_subscriptions (callback_host, expires_at);
-- A host's and a client's intents waiting for their request (WEBSUB_MAX_PENDING).
create index websub_tasks_intent_host on websub_tasks (callback_host) where kind <> 'deliver';
create index websub_tasks_intent_client on websub_tasks (requested_by) where kind <> 'deliver';
-- Due intents, claimed in turn with deliveries (however many deliveries are due before them).
create index websub_tasks_intent_due_at on websub_tasks (due_at) where kind <> 'deliver';
