-- rssCloud's third protocol (issue 40): a subscriber may ask to be told by an XML-RPC call
-- (protocol=xml-rpc), as rsscloud-server 4.0.0 (and 2.x before it) accepts; the call's method is the
-- notifyProcedure it named, kept with the subscription. The other two protocols have none.
alter table rsscloud_subscriptions drop constraint rsscloud_subscriptions_protocol_check;
alter table rsscloud_subscriptions add constraint rsscloud_subscriptions_protocol_check
  check (protocol in ('http-post', 'https-post', 'xml-rpc'));
alter table rsscloud_subscriptions add column notify_procedure text;
alter table rsscloud_subscriptions add constraint rsscloud_subscriptions_procedure_check
  check ((protocol = 'xml-rpc') = (notify_procedure is not null));
