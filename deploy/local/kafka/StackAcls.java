// Sets the local stack's Kafka ACLs to exactly those read from stdin, one a line:
//   User:<name> <TOPIC|GROUP|...> <LITERAL|PREFIXED> <resource name> <operation>
// and sets the SCRAM-SHA-512 credentials of the users given as lines
//   SCRAM <name> <password>
// Run by local_stack/kafka_auth.py as a single-file program (java -cp 'libs/*' StackAcls.java
// <admin client properties>): the Python client speaks no CreateAcls version Kafka 4 keeps.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class StackAcls {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        Set<AclBinding> wanted = new HashSet<>();
        List<UserScramCredentialAlteration> users = new ArrayList<>();
        BufferedReader reader = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = reader.readLine()) != null; ) {
            line = line.strip();
            if (line.isEmpty()) continue;
            String[] f = line.split(" ");
            if (f[0].equals("SCRAM")) {
                users.add(new UserScramCredentialUpsertion(
                    f[1], new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), f[2]));
                continue;
            }
            wanted.add(new AclBinding(
                new ResourcePattern(ResourceType.fromString(f[1]), f[3], PatternType.fromString(f[2])),
                new AccessControlEntry(f[0], "*", AclOperation.fromString(f[4]), AclPermissionType.ALLOW)));
        }
        try (Admin admin = Admin.create(props)) {
            List<AclBindingFilter> stale = new ArrayList<>();
            for (AclBinding existing : admin.describeAcls(AclBindingFilter.ANY).values().get()) {
                if (!wanted.contains(existing)) stale.add(existing.toFilter());
            }
            if (!stale.isEmpty()) admin.deleteAcls(stale).all().get();
            admin.createAcls(wanted).all().get();
            if (!users.isEmpty()) admin.alterUserScramCredentials(users).all().get();
        }
    }
}
