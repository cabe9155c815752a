-- Server-side secrets shared by every engine on this database (the key that
-- signs webhook URLs). Never shown by the API.
CREATE TABLE secrets (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
