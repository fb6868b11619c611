-- The demo source's schema `shop`: a small web shop whose tables cover the column types DBus carries.
-- Idempotent: safe to run again (tables are created only when missing).
CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
USE shop;

CREATE TABLE IF NOT EXISTS customers (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name        VARCHAR(100) NOT NULL,
  email       VARCHAR(255) NOT NULL,
  phone       VARCHAR(32),
  id_card     CHAR(18),
  tier        ENUM('basic','silver','gold') NOT NULL DEFAULT 'basic',
  tags        SET('vip','b2b','newsletter') NOT NULL DEFAULT '',
  profile     JSON,
  created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  UNIQUE KEY uk_email (email)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS products (
  sku         VARCHAR(32) NOT NULL PRIMARY KEY,
  title       VARCHAR(200) NOT NULL,
  description MEDIUMTEXT,
  price       DECIMAL(12,2) NOT NULL,
  weight_kg   FLOAT,
  in_stock    TINYINT(1) NOT NULL DEFAULT 1,
  flags       BIT(8) NOT NULL DEFAULT b'0',
  image       BLOB,
  launched    YEAR
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS orders (
  id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  customer_id BIGINT UNSIGNED NOT NULL,
  status      VARCHAR(16) NOT NULL,
  total       DECIMAL(14,2) NOT NULL,
  placed_at   DATETIME(3) NOT NULL,
  ship_by     DATE,
  note        TEXT,
  KEY idx_customer (customer_id),
  KEY idx_placed (placed_at)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS order_items (
  order_id    BIGINT NOT NULL,
  line_no     SMALLINT UNSIGNED NOT NULL,
  sku         VARCHAR(32) NOT NULL,
  quantity    INT NOT NULL,
  unit_price  DECIMAL(12,2) NOT NULL,
  prep_time   TIME(3),
  PRIMARY KEY (order_id, line_no)
) ENGINE=InnoDB;
