import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.apicurio.registry.utils.converter.avro.AvroData;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.io.DecoderFactory;
import org.apache.kafka.connect.data.ConnectSchema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

/**
 * Reads DBus's debezium-json and avro records with Kafka Connect's own classes (tests/integration/
 * test_formats_connect_classes.py). For each record N of a folder (N.json: a debezium-json value; N.avro and
 * N.avsc: the avro value and its registered schema) it prints one JSON line:
 * {"record": N, "json_round_trip": JsonConverter reads N.json (schemas.enable) into a valid Connect value and
 *  writes it back as the same JSON, "avro_schema": the Avro schema Apicurio's AvroData derives from that
 *  Connect schema (or the error it raises), "avro_payload"/"avro_connect_schema": N.avro read with N.avsc and
 *  turned into Connect data by AvroData is the same payload and Connect schema as N.json}.
 */
public final class ConnectCheck {
  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    int count = Integer.parseInt(args[1]);
    ObjectMapper json = new ObjectMapper();
    JsonConverter converter = new JsonConverter();
    converter.configure(Map.of("schemas.enable", "true", "converter.type", "value"), false);
    AvroData avroData = new AvroData(100);
    for (int i = 0; i < count; i++) {
      ObjectNode out = json.createObjectNode().put("record", i);
      byte[] value = Files.readAllBytes(dir.resolve(i + ".json"));
      SchemaAndValue connect = converter.toConnectData("t", value);
      ConnectSchema.validateValue(connect.schema(), connect.value());
      JsonNode written = json.readTree(value);
      out.put("json_round_trip",
          written.equals(json.readTree(converter.fromConnectData("t", connect.schema(), connect.value()))));
      try {
        out.put("avro_schema", avroData.fromConnectSchema(connect.schema()).toString());
      } catch (RuntimeException e) {
        out.put("avro_schema_error", e.toString());
      }
      byte[] avro = Files.readAllBytes(dir.resolve(i + ".avro"));
      org.apache.avro.Schema schema = new org.apache.avro.Schema.Parser().parse(Files.readString(dir.resolve(i + ".avsc")));
      Object datum = new GenericDatumReader<>(schema)
          .read(null, DecoderFactory.get().binaryDecoder(avro, 5, avro.length - 5, null));
      SchemaAndValue fromAvro = avroData.toConnectData(schema, datum);
      JsonNode back = json.readTree(converter.fromConnectData("t", fromAvro.schema(), fromAvro.value()));
      out.put("avro_payload", written.get("payload").equals(back.get("payload")));
      out.put("avro_connect_schema", written.get("schema").equals(back.get("schema")));
      System.out.println(json.writeValueAsString(out));
    }
  }
}
