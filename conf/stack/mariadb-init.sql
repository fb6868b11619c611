-- Users and databases of the local stack. Run as root after every first start or change; idempotent.

CREATE DATABASE IF NOT EXISTS `dbus` CHARACTER SET utf8mb4;   -- meta store + heartbeat

-- Application user. Tests create and drop databases named dbus_test_<uuid>, so on this local,
-- loopback-only stack the user gets ALL on *.* (never do this on a shared server).
CREATE USER IF NOT EXISTS 'dbus'@'127.0.0.1' IDENTIFIED BY 'dbus';
CREATE USER IF NOT EXISTS 'dbus'@'localhost' IDENTIFIED BY 'dbus';
GRANT ALL PRIVILEGES ON *.* TO 'dbus'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'dbus'@'localhost';

-- Binlog reader (python-mysql-replication), the least MariaDB 10.11 needs:
--   REPLICATION SLAVE  COM_BINLOG_DUMP (streaming the binlog)
--   BINLOG MONITOR     SHOW MASTER STATUS / SHOW BINLOG STATUS / SHOW BINARY LOGS
--   SELECT             table metadata from information_schema (primary keys, column types); the
--                      reader itself gets column names from the binlog (binlog_row_metadata=FULL)
-- RELOAD and REPLICATION SLAVE ADMIN are not needed (checked with python-mysql-replication 1.0.17).
CREATE USER IF NOT EXISTS 'dbus_repl'@'127.0.0.1' IDENTIFIED BY 'dbus_repl';
CREATE USER IF NOT EXISTS 'dbus_repl'@'localhost' IDENTIFIED BY 'dbus_repl';
GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'dbus_repl'@'127.0.0.1';
GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'dbus_repl'@'localhost';

-- The binlog reader's rights again, for an account that must connect over TLS (REQUIRE SSL): what
-- sources.<ds>.mysql.tls is tested with (tests/integration/test_mysql_tls_live.py)
CREATE USER IF NOT EXISTS 'dbus_tls'@'127.0.0.1' IDENTIFIED BY 'dbus_tls';
CREATE USER IF NOT EXISTS 'dbus_tls'@'localhost' IDENTIFIED BY 'dbus_tls';
ALTER USER 'dbus_tls'@'127.0.0.1' REQUIRE SSL;
ALTER USER 'dbus_tls'@'localhost' REQUIRE SSL;
GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'dbus_tls'@'127.0.0.1';
GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'dbus_tls'@'localhost';

FLUSH PRIVILEGES;
