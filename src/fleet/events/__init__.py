"""Events out: the transactional outbox every writer fills in its own transaction, subscriptions,
and their signed webhook deliveries (`fleet deliver`)."""
