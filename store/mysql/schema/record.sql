-- The schema versions applied to the table, one row each; the highest
-- is the table's version.
CREATE TABLE IF NOT EXISTS {schema_version} (
  version    INT UNSIGNED NOT NULL,
  applied_at DATETIME(6) NOT NULL,
  PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO {schema_version} (version, applied_at) VALUES ({version}, UTC_TIMESTAMP(6));
