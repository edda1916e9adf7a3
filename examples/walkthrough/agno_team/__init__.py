"""An agno 3.1.10 team (a leader delegating to two members), for rehearsal's walkthrough."""
