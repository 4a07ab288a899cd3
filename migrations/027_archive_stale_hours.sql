-- Archive hours to render again because a weblog with pings in them was held or released by the spam
-- rescoring job (issue 39: a weblog held is left out of the archives too, earlier hours included). The job
-- marks the hours in the commit that flips the weblog; the renderer renders a few of them per tick and
-- deletes each once rendered (a published archive only: an hour never rendered lists what the reads list
-- when it is).
create table archive_stale_hours (
  hour timestamptz primary key,
  marked_at timestamptz not null default now()
);
