-- Every column type of tests/integration/every_type.py (the rows MAX, MIN, ODD, NULL; LONGTEXT and
-- the two large blobs shortened here: their full sizes, which test chunking, stay in every_type.py), then
-- an UPDATE, a DELETE and a transaction mixing all three with a primary-key change.
SET time_zone = '+00:00', sql_mode = '';
CREATE TABLE cdc_types (
  `id` INT NOT NULL PRIMARY KEY,
  `ti` TINYINT,
  `tiu` TINYINT UNSIGNED,
  `si` SMALLINT,
  `siu` SMALLINT UNSIGNED,
  `mi` MEDIUMINT,
  `miu` MEDIUMINT UNSIGNED,
  `i` INT,
  `iu` INT UNSIGNED,
  `bi` BIGINT,
  `biu` BIGINT UNSIGNED,
  `de` DECIMAL(65,30),
  `d2` DECIMAL(10,2),
  `fl` FLOAT,
  `db` DOUBLE,
  `b1` BIT(1),
  `b64` BIT(64),
  `dt` DATE,
  `dtm` DATETIME,
  `dtm6` DATETIME(6),
  `ts` TIMESTAMP NULL,
  `ts3` TIMESTAMP(3) NULL,
  `tm` TIME,
  `tm3` TIME(3),
  `yr` YEAR,
  `ch` CHAR(10),
  `vc` VARCHAR(20),
  `tt` TINYTEXT,
  `tx` TEXT,
  `mt` MEDIUMTEXT,
  `lt` LONGTEXT,
  `bn` BINARY(4),
  `vb` VARBINARY(16),
  `tb` TINYBLOB,
  `bl` BLOB,
  `mb` MEDIUMBLOB,
  `lb` LONGBLOB,
  `en` ENUM('small','medium','large'),
  `st` SET('red','green','blue'),
  `js` JSON,
  `i4` INET4,
  `i6` INET6,
  `uu` UUID,
  `nn` VARCHAR(5) NOT NULL DEFAULT ''
) DEFAULT CHARSET=utf8mb4;

-- MAX: the largest value of each type
INSERT INTO cdc_types VALUES (1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615, '99999999999999999999999999999999999.999999999999999999999999999999', '99999999.99', 1.1, 1.7976931348623157e+308, x'01', x'ffffffffffffffff', '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07', '2038-01-19 03:14:07.999', '838:59:59', '838:59:58.999', 2155, 'abcdefghij', 'héllo 😀 ✓ 漢字', 'tiny 😀', 'text ✓', 'medium 😀', 'long😀 text', x'01020304', x'00ff00', x'00', x'000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff', x'00010001', x'ababab', 'large', 'blue,red', '{\"k\": [1, 2.5, null, true, \"😀\"], \"n\": {\"x\": -1}}', '255.255.255.255', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'a');
-> {"ums_op_": "i", "id": 1, "ti": 127, "tiu": 255, "si": 32767, "siu": 65535, "mi": 8388607, "miu": 16777215, "i": 2147483647, "iu": "4294967295", "bi": "9223372036854775807", "biu": "18446744073709551615", "de": "99999999999999999999999999999999999.999999999999999999999999999999", "d2": "99999999.99", "fl": 1.1, "db": 1.7976931348623157e+308, "b1": 1, "b64": "18446744073709551615", "dt": "9999-12-31", "dtm": "9999-12-31 23:59:59", "dtm6": "9999-12-31 23:59:59.999999", "ts": "2038-01-19 03:14:07", "ts3": "2038-01-19 03:14:07.999", "tm": "838:59:59", "tm3": "838:59:58.999", "yr": 2155, "ch": "abcdefghij", "vc": "héllo 😀 ✓ 漢字", "tt": "tiny 😀", "tx": "text ✓", "mt": "medium 😀", "lt": "long😀 text", "bn": "AQIDBA==", "vb": "AP8A", "tb": "AA==", "bl": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==", "mb": "AAEAAQ==", "lb": "q6ur", "en": "large", "st": "red,blue", "js": "{\"k\": [1, 2.5, null, true, \"😀\"], \"n\": {\"x\": -1}}", "i4": "255.255.255.255", "i6": "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "uu": "ffffffff-ffff-ffff-ffff-ffffffffffff", "nn": "a"}

-- MIN: the smallest value of each type, empty strings and blobs
INSERT INTO cdc_types VALUES (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, '-99999999999999999999999999999999999.999999999999999999999999999999', '-99999999.99', -3.14159274, -2.2250738585072014e-308, x'00', x'8000000000000001', '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.000001', '1970-01-01 00:00:01', '1970-01-01 00:00:01.001', '-838:59:59', '-838:59:58.999', 1901, '', '', '', '', '', '', x'', x'', x'', x'', x'', x'', 'small', '', '[]', '0.0.0.0', '::', '00000000-0000-0000-0000-000000000000', '');
-> {"ums_op_": "i", "id": 2, "ti": -128, "tiu": 0, "si": -32768, "siu": 0, "mi": -8388608, "miu": 0, "i": -2147483648, "iu": "0", "bi": "-9223372036854775808", "biu": "0", "de": "-99999999999999999999999999999999999.999999999999999999999999999999", "d2": "-99999999.99", "fl": -3.1415927, "db": -2.2250738585072014e-308, "b1": 0, "b64": "9223372036854775809", "dt": "1000-01-01", "dtm": "1000-01-01 00:00:00", "dtm6": "1000-01-01 00:00:00.000001", "ts": "1970-01-01 00:00:01", "ts3": "1970-01-01 00:00:01.001", "tm": "-838:59:59", "tm3": "-838:59:58.999", "yr": 1901, "ch": "", "vc": "", "tt": "", "tx": "", "mt": "", "lt": "", "bn": "AAAAAA==", "vb": "", "tb": "", "bl": "", "mb": "", "lb": "", "en": "small", "st": "", "js": "[]", "i4": "0.0.0.0", "i6": "::", "uu": "00000000-0000-0000-0000-000000000000", "nn": ""}

-- ODD: zero dates, negative fractions, trailing spaces, the invalid ENUM value '' (non-strict sql_mode)
INSERT INTO cdc_types VALUES (3, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, '0.000000000000000000000000000001', '0.5', 0.0, -0.0, x'01', x'05', '0000-00-00', '0000-00-00 00:00:00', '2024-00-15 01:02:03.5', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000', '-00:00:01', '-00:00:00.001', 0, 'pad  ', 'trail ', ' ', '	', 'x', 'y', x'ab', x'', NULL, NULL, NULL, NULL, '', 'red,green,blue', '\"😀\"', '10.0.0.1', '::ffff:1.2.3.4', '123e4567-e89b-12d3-a456-426655440000', 'x');
-> {"ums_op_": "i", "id": 3, "ti": -1, "tiu": 1, "si": -1, "siu": 1, "mi": -1, "miu": 1, "i": -1, "iu": "1", "bi": "-1", "biu": "1", "de": "0.000000000000000000000000000001", "d2": "0.50", "fl": 0.0, "db": 0.0, "b1": 1, "b64": "5", "dt": "0000-00-00", "dtm": "0000-00-00 00:00:00", "dtm6": "2024-00-15 01:02:03.500000", "ts": "0000-00-00 00:00:00", "ts3": "0000-00-00 00:00:00.000", "tm": "-00:00:01", "tm3": "-00:00:00.001", "yr": 0, "ch": "pad", "vc": "trail ", "tt": " ", "tx": "\t", "mt": "x", "lt": "y", "bn": "qwAAAA==", "vb": "", "tb": null, "bl": null, "mb": null, "lb": null, "en": "", "st": "red,green,blue", "js": "\"😀\"", "i4": "10.0.0.1", "i6": "::ffff:1.2.3.4", "uu": "123e4567-e89b-12d3-a456-426655440000", "nn": "x"}

-- NULL in every nullable column
INSERT INTO cdc_types VALUES (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'n');
-> {"ums_op_": "i", "id": 4, "ti": null, "tiu": null, "si": null, "siu": null, "mi": null, "miu": null, "i": null, "iu": null, "bi": null, "biu": null, "de": null, "d2": null, "fl": null, "db": null, "b1": null, "b64": null, "dt": null, "dtm": null, "dtm6": null, "ts": null, "ts3": null, "tm": null, "tm3": null, "yr": null, "ch": null, "vc": null, "tt": null, "tx": null, "mt": null, "lt": null, "bn": null, "vb": null, "tb": null, "bl": null, "mb": null, "lb": null, "en": null, "st": null, "js": null, "i4": null, "i6": null, "uu": null, "nn": "n"}

-- an UPDATE of three rows: three 'u' tuples, the after images (before images are off by default)
UPDATE cdc_types SET d2 = -d2, vc = CONCAT(vc, '✓'), st = 'green', js = '{"updated": true}', tm3 = '-12:00:00.5', b1 = b'1', ts3 = '2001-02-03 04:05:06.789', fl = fl * 2, lt = 'short now', bn = x'ff', i6 = '2001:db8::ff00:42:8329', uu = '6ccd780c-baba-1026-9564-5b8c656024db', i4 = '1.2.3.4' WHERE id IN (1, 2, 4);
-> {"ums_op_": "u", "id": 1, "ti": 127, "tiu": 255, "si": 32767, "siu": 65535, "mi": 8388607, "miu": 16777215, "i": 2147483647, "iu": "4294967295", "bi": "9223372036854775807", "biu": "18446744073709551615", "de": "99999999999999999999999999999999999.999999999999999999999999999999", "d2": "-99999999.99", "fl": 2.2, "db": 1.7976931348623157e+308, "b1": 1, "b64": "18446744073709551615", "dt": "9999-12-31", "dtm": "9999-12-31 23:59:59", "dtm6": "9999-12-31 23:59:59.999999", "ts": "2038-01-19 03:14:07", "ts3": "2001-02-03 04:05:06.789", "tm": "838:59:59", "tm3": "-12:00:00.500", "yr": 2155, "ch": "abcdefghij", "vc": "héllo 😀 ✓ 漢字✓", "tt": "tiny 😀", "tx": "text ✓", "mt": "medium 😀", "lt": "short now", "bn": "/wAAAA==", "vb": "AP8A", "tb": "AA==", "bl": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==", "mb": "AAEAAQ==", "lb": "q6ur", "en": "large", "st": "green", "js": "{\"updated\": true}", "i4": "1.2.3.4", "i6": "2001:db8::ff00:42:8329", "uu": "6ccd780c-baba-1026-9564-5b8c656024db", "nn": "a"}
-> {"ums_op_": "u", "id": 2, "ti": -128, "tiu": 0, "si": -32768, "siu": 0, "mi": -8388608, "miu": 0, "i": -2147483648, "iu": "0", "bi": "-9223372036854775808", "biu": "0", "de": "-99999999999999999999999999999999999.999999999999999999999999999999", "d2": "99999999.99", "fl": -6.2831855, "db": -2.2250738585072014e-308, "b1": 1, "b64": "9223372036854775809", "dt": "1000-01-01", "dtm": "1000-01-01 00:00:00", "dtm6": "1000-01-01 00:00:00.000001", "ts": "1970-01-01 00:00:01", "ts3": "2001-02-03 04:05:06.789", "tm": "-838:59:59", "tm3": "-12:00:00.500", "yr": 1901, "ch": "", "vc": "✓", "tt": "", "tx": "", "mt": "", "lt": "short now", "bn": "/wAAAA==", "vb": "", "tb": "", "bl": "", "mb": "", "lb": "", "en": "small", "st": "green", "js": "{\"updated\": true}", "i4": "1.2.3.4", "i6": "2001:db8::ff00:42:8329", "uu": "6ccd780c-baba-1026-9564-5b8c656024db", "nn": ""}
-> {"ums_op_": "u", "id": 4, "ti": null, "tiu": null, "si": null, "siu": null, "mi": null, "miu": null, "i": null, "iu": null, "bi": null, "biu": null, "de": null, "d2": null, "fl": null, "db": null, "b1": 1, "b64": null, "dt": null, "dtm": null, "dtm6": null, "ts": null, "ts3": "2001-02-03 04:05:06.789", "tm": null, "tm3": "-12:00:00.500", "yr": null, "ch": null, "vc": null, "tt": null, "tx": null, "mt": null, "lt": "short now", "bn": "/wAAAA==", "vb": null, "tb": null, "bl": null, "mb": null, "lb": null, "en": null, "st": "green", "js": "{\"updated\": true}", "i4": "1.2.3.4", "i6": "2001:db8::ff00:42:8329", "uu": "6ccd780c-baba-1026-9564-5b8c656024db", "nn": "n"}

-- a DELETE: the 'd' tuple holds the row as it was
DELETE FROM cdc_types WHERE id = 2;
-> {"ums_op_": "d", "id": 2, "ti": -128, "tiu": 0, "si": -32768, "siu": 0, "mi": -8388608, "miu": 0, "i": -2147483648, "iu": "0", "bi": "-9223372036854775808", "biu": "0", "de": "-99999999999999999999999999999999999.999999999999999999999999999999", "d2": "99999999.99", "fl": -6.2831855, "db": -2.2250738585072014e-308, "b1": 1, "b64": "9223372036854775809", "dt": "1000-01-01", "dtm": "1000-01-01 00:00:00", "dtm6": "1000-01-01 00:00:00.000001", "ts": "1970-01-01 00:00:01", "ts3": "2001-02-03 04:05:06.789", "tm": "-838:59:59", "tm3": "-12:00:00.500", "yr": 1901, "ch": "", "vc": "✓", "tt": "", "tx": "", "mt": "", "lt": "short now", "bn": "/wAAAA==", "vb": "", "tb": "", "bl": "", "mb": "", "lb": "", "en": "small", "st": "green", "js": "{\"updated\": true}", "i4": "1.2.3.4", "i6": "2001:db8::ff00:42:8329", "uu": "6ccd780c-baba-1026-9564-5b8c656024db", "nn": ""}

-- one transaction: insert, primary-key change (1 -> 10), delete, update
BEGIN;
INSERT INTO cdc_types (id, ti, vc, js, nn) VALUES (5, 5, 'five ✋', '{}', 'f');
-> {"ums_op_": "i", "id": 5, "ti": 5, "tiu": null, "si": null, "siu": null, "mi": null, "miu": null, "i": null, "iu": null, "bi": null, "biu": null, "de": null, "d2": null, "fl": null, "db": null, "b1": null, "b64": null, "dt": null, "dtm": null, "dtm6": null, "ts": null, "ts3": null, "tm": null, "tm3": null, "yr": null, "ch": null, "vc": "five ✋", "tt": null, "tx": null, "mt": null, "lt": null, "bn": null, "vb": null, "tb": null, "bl": null, "mb": null, "lb": null, "en": null, "st": null, "js": "{}", "i4": null, "i6": null, "uu": null, "nn": "f"}
UPDATE cdc_types SET id = 10, yr = 1999 WHERE id = 1;
-> {"ums_op_": "u", "id": 10, "ti": 127, "tiu": 255, "si": 32767, "siu": 65535, "mi": 8388607, "miu": 16777215, "i": 2147483647, "iu": "4294967295", "bi": "9223372036854775807", "biu": "18446744073709551615", "de": "99999999999999999999999999999999999.999999999999999999999999999999", "d2": "-99999999.99", "fl": 2.2, "db": 1.7976931348623157e+308, "b1": 1, "b64": "18446744073709551615", "dt": "9999-12-31", "dtm": "9999-12-31 23:59:59", "dtm6": "9999-12-31 23:59:59.999999", "ts": "2038-01-19 03:14:07", "ts3": "2001-02-03 04:05:06.789", "tm": "838:59:59", "tm3": "-12:00:00.500", "yr": 1999, "ch": "abcdefghij", "vc": "héllo 😀 ✓ 漢字✓", "tt": "tiny 😀", "tx": "text ✓", "mt": "medium 😀", "lt": "short now", "bn": "/wAAAA==", "vb": "AP8A", "tb": "AA==", "bl": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==", "mb": "AAEAAQ==", "lb": "q6ur", "en": "large", "st": "green", "js": "{\"updated\": true}", "i4": "1.2.3.4", "i6": "2001:db8::ff00:42:8329", "uu": "6ccd780c-baba-1026-9564-5b8c656024db", "nn": "a"}
DELETE FROM cdc_types WHERE id = 3;
-> {"ums_op_": "d", "id": 3, "ti": -1, "tiu": 1, "si": -1, "siu": 1, "mi": -1, "miu": 1, "i": -1, "iu": "1", "bi": "-1", "biu": "1", "de": "0.000000000000000000000000000001", "d2": "0.50", "fl": 0.0, "db": 0.0, "b1": 1, "b64": "5", "dt": "0000-00-00", "dtm": "0000-00-00 00:00:00", "dtm6": "2024-00-15 01:02:03.500000", "ts": "0000-00-00 00:00:00", "ts3": "0000-00-00 00:00:00.000", "tm": "-00:00:01", "tm3": "-00:00:00.001", "yr": 0, "ch": "pad", "vc": "trail ", "tt": " ", "tx": "\t", "mt": "x", "lt": "y", "bn": "qwAAAA==", "vb": "", "tb": null, "bl": null, "mb": null, "lb": null, "en": "", "st": "red,green,blue", "js": "\"😀\"", "i4": "10.0.0.1", "i6": "::ffff:1.2.3.4", "uu": "123e4567-e89b-12d3-a456-426655440000", "nn": "x"}
UPDATE cdc_types SET ti = ti + 1 WHERE id = 5;
-> {"ums_op_": "u", "id": 5, "ti": 6, "tiu": null, "si": null, "siu": null, "mi": null, "miu": null, "i": null, "iu": null, "bi": null, "biu": null, "de": null, "d2": null, "fl": null, "db": null, "b1": null, "b64": null, "dt": null, "dtm": null, "dtm6": null, "ts": null, "ts3": null, "tm": null, "tm3": null, "yr": null, "ch": null, "vc": "five ✋", "tt": null, "tx": null, "mt": null, "lt": null, "bn": null, "vb": null, "tb": null, "bl": null, "mb": null, "lb": null, "en": null, "st": null, "js": "{}", "i4": null, "i6": null, "uu": null, "nn": "f"}
COMMIT;
