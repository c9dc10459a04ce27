-- An SQLite database that is not an Nsight Systems export (what a browser or app might store).
CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT);
INSERT INTO moz_places VALUES (1, 'https://example.org/');
