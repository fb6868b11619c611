-- The smallest case: one row inserted, changed and deleted. Each statement is followed by the UMS tuples
-- it produces, one '->' line each (ums_id_, ums_ts_ and ums_uid_ depend on the run and are left out).
CREATE TABLE minimal (
  id INT NOT NULL PRIMARY KEY,
  account VARCHAR(20),
  amount DECIMAL(10,2),
  balance BIGINT,
  paid_at DATETIME(3)
);
INSERT INTO minimal VALUES (1, 'Zoë', 19.90, 100, NULL);
-> {"ums_op_": "i", "id": 1, "account": "Zoë", "amount": "19.90", "balance": "100", "paid_at": null}
UPDATE minimal SET amount = 25.00, paid_at = '2024-01-02 03:04:05.250' WHERE id = 1;
-> {"ums_op_": "u", "id": 1, "account": "Zoë", "amount": "25.00", "balance": "100", "paid_at": "2024-01-02 03:04:05.250"}
DELETE FROM minimal WHERE id = 1;
-> {"ums_op_": "d", "id": 1, "account": "Zoë", "amount": "25.00", "balance": "100", "paid_at": "2024-01-02 03:04:05.250"}
